# Tests of the pmhash directory and the names of its files, seen from
# outside the server: loading without shared_preload_libraries, file names
# and modes on /dev/shm and in the data directory, a directory holding
# exactly the files of the existing indexes, a second cluster refused the
# directory of a running one, the orphan cleaner, and DROP EXTENSION
# removing every file.  Damaged files are in 007_damaged_files, unlogged
# and temporary indexes in 008_unlogged_temp, tablespaces and databases in
# 009_databases.
# Every error is checked by SQLSTATE and message, every answer of an index
# is compared with a sequential scan, and the server must never crash.
use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery qw(pmhash_dir pmh_files wait_until);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

############################################################################
# Helpers
############################################################################

# Check the file of an index: named after its relfilenode, mode 0600,
# reported by pmhash_stats.
sub check_file_identity
{
	my ($node, $db, $index, $name) = @_;
	my ($dbo, $filenode) = split /\|/, $node->safe_psql($db,
		"SELECT d.oid, pg_relation_filenode('$index') "
		  . 'FROM pg_database d WHERE datname = current_database()');
	my $path = pmhash_dir($node) . "/${dbo}_${filenode}.pmh";
	ok(-f $path, "$name: file $path exists");
	is(file_mode($path), '0600', "$name: file mode is 0600");
	my $reported = $node->safe_psql($db, "SELECT path FROM pmhash_stats('$index')");
	$reported = $node->data_dir . "/$reported" unless $reported =~ m{^/};
	is($reported, $path, "$name: pmhash_stats reports that file");
}

############################################################################
# 1. Without shared_preload_libraries, CREATE EXTENSION explains what to do.
# The same node then runs with pmhash.directory at its default (in the data
# directory).
############################################################################

my $plain = start_new_node('plain', dir => 'default', preload => 0);
expect_error(
	$plain, 'postgres',
	'CREATE EXTENSION pmhash',
	{
		state => '55000',
		msg => qr/pmhash must be loaded via shared_preload_libraries/,
		hint => qr/Add pmhash to shared_preload_libraries in postgresql\.conf and restart the server\./
	},
	'CREATE EXTENSION without preloading');
is($plain->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'pmhash'"),
	'0', 'the failed CREATE EXTENSION left no extension behind');
$plain->append_conf('postgresql.conf', "shared_preload_libraries = 'pmhash'");
$plain->restart;

############################################################################
# 2. File names and modes (on /dev/shm, and in the data directory).
############################################################################

my $node = start_new_node('main', dir => 'shm');
my $dir = pmhash_dir($node);
make_table($node, 'postgres', 't', 20000, 1000);
make_table($node, 'postgres', 'small', 300, 30);
my $dboid = $node->safe_psql('postgres',
	'SELECT oid FROM pg_database WHERE datname = current_database()');

check_file_identity($node, 'postgres', 't_k', 'file on /dev/shm');
is_deeply([ pmh_files($node) ], [ all_index_files($node, 'postgres') ],
	'pmhash.directory holds exactly the files of the existing indexes');
compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'fresh index');

$plain->safe_psql('postgres', 'CREATE EXTENSION pmhash');
make_table($plain, 'postgres', 'logged', 2000, 100);
check_file_identity($plain, 'postgres', 'logged_k', 'file in the data directory');
like(pmhash_dir($plain), qr{/pmhash$}, 'default pmhash.directory is inside the data directory');

# A second cluster pointed at the same directory refuses to start.
{
	my $intruder = PostgreSQL::Test::Cluster->new('intruder');
	$intruder->init;
	$intruder->append_conf('postgresql.conf',
		"shared_preload_libraries = 'pmhash'\npmhash.directory = '$dir'");
	ok(!$intruder->start(fail_ok => 1), 'a second cluster cannot use the same pmhash.directory');
	like(
		slurp_file($intruder->logfile),
		qr/FATAL:  pmhash directory "\Q$dir\E" is in use by another server\n.*DETAIL:  The server with data directory "\Q@{[ $node->data_dir ]}\E" holds "\Q$dir\E\/pmhash\.lock"\.\n.*HINT:  Give each cluster its own pmhash\.directory\./s,
		'the refusal names the directory, its owner and what to do');
	is_deeply([ pmh_files($node) ], [ all_index_files($node, 'postgres') ],
		'the refused cluster left the files alone');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'after the refused start');
}

############################################################################
# 3. The file cleaner removes orphaned files, and nothing else.
############################################################################

{
	my @live = all_index_files($node, 'postgres');
	my @orphans = (
		"${dboid}_999999.pmh", "t3_${dboid}_999998.pmh",
		"4000000000_16384.pmh");
	my @unrelated = ('notes.txt', "${dboid}_999997.pmh.bak", 'x_1_2_3.pmh');
	my $template = "$dir/$live[0]";
	$node->stop;
	copy($template, "$dir/$_") or die "copy: $!" for @orphans, @unrelated;
	$node->start;
	ok(wait_until(70, sub { !grep { -e "$dir/$_" } @orphans }),
		'the cleaner removes orphaned files');
	ok(-e "$dir/$_", "a live index's file $_ stays") for @live;
	ok(-e "$dir/$_", "an unrelated file $_ stays") for @unrelated;
	like(slurp_file($node->logfile), qr/removed orphaned pmhash file ".*999999\.pmh"/,
		'the cleaner logs what it removed');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'after the cleaner ran');
	unlink "$dir/$_" for @unrelated;
}

############################################################################
# 4. DROP EXTENSION leaves no file behind (on /dev/shm in 009_databases).
############################################################################

$plain->safe_psql('postgres', 'DROP EXTENSION pmhash CASCADE');
is_deeply([ pmh_files($plain) ], [],
	'DROP EXTENSION pmhash CASCADE removes every file in the data directory');

check_whole_logs($node, $plain);

done_testing();
