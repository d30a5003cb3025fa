# Tests of pmhash index files that move or are copied with their database
# or tablespace, which PostgreSQL handles for the main fork only: ALTER
# INDEX and ALTER DATABASE SET TABLESPACE, CREATE DATABASE from a template
# holding pmhash indexes; and the files that DROP DATABASE and DROP
# EXTENSION must remove; a CREATE DATABASE that fails to copy the index
# files leaves no directory behind.
# Every answer of an index is compared with a sequential scan, and the
# server must never crash.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery qw(pmh_files pmhash_dir);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

############################################################################
# Helpers
############################################################################

# Check that a moved index still answers like a seqscan and that the files
# of the database are exactly those of its indexes; then REINDEX it.
sub check_moved
{
	my ($node, $db, $index, $table, $name) = @_;
	compare_with_seqscan($node, $db, $index, $table, 'k', -1, 101, $name);
	my $dboid = $node->safe_psql($db,
		'SELECT oid FROM pg_database WHERE datname = current_database()');
	is_deeply([ db_files($node, $dboid) ],
		[ all_index_files($node, $db) ], "$name: the files are exactly those of the indexes");
	reindex_and_check($node, $db, $index, $table, 'k', -1, 101, $name);
}

############################################################################
# The node, with its files on /dev/shm, and an index that stays where it is.
############################################################################

my $node = start_new_node('main', dir => 'shm');
make_table($node, 'postgres', 't', 3000, 100);

############################################################################
# 1. Moving indexes to another tablespace (core copies the main fork only).
############################################################################

{
	my $mark = mark($node);
	my $tsdir = PostgreSQL::Test::Utils::tempdir();
	$node->safe_psql('postgres', "CREATE TABLESPACE ts LOCATION '$tsdir'");
	make_table($node, 'postgres', 'mv', 3000, 100);
	$node->safe_psql('postgres', 'ALTER INDEX mv_k SET TABLESPACE ts');
	check_moved($node, 'postgres', 'mv_k', 'mv', 'ALTER INDEX SET TABLESPACE');

	$node->safe_psql('postgres', 'CREATE DATABASE moved');
	$node->safe_psql('moved', 'CREATE EXTENSION pmhash');
	make_table($node, 'moved', 'mvd', 3000, 100);
	$node->safe_psql('postgres', 'ALTER DATABASE moved SET TABLESPACE ts');
	check_moved($node, 'moved', 'mvd_k', 'mvd', 'ALTER DATABASE SET TABLESPACE');

	$node->safe_psql('postgres', 'DROP DATABASE moved');
	$node->safe_psql('postgres', 'DROP TABLE mv; DROP TABLESPACE ts');
	check_alive($node, $mark, 'tablespaces');
}

############################################################################
# 2. DROP DATABASE and DROP EXTENSION leave no file behind.
############################################################################

{
	my $mark = mark($node);
	$node->safe_psql('postgres', 'CREATE DATABASE gone');
	$node->safe_psql('gone', 'CREATE EXTENSION pmhash');
	make_table($node, 'gone', 'g1', 3000, 100);
	make_table($node, 'gone', 'g2', 100, 10);
	my $goneoid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'gone'");
	is(scalar(() = db_files($node, $goneoid)), 2, 'the database has two index files');

	# a copy of the database gets copies of the files, and its indexes work
	$node->safe_psql('postgres', 'CREATE DATABASE copied TEMPLATE gone');
	my $copiedoid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'copied'");
	is(scalar(() = db_files($node, $copiedoid)), 2, 'CREATE DATABASE copies the two index files');
	compare_with_seqscan($node, 'copied', 'g1_k', 'g1', 'k', -1, 101, 'copied database');
	is($node->safe_psql('copied', "SELECT pmhash_verify('g1_k') = (SELECT count(k) FROM g1)"),
		't', 'copied database: pmhash_verify passes');
	reindex_and_check($node, 'copied', 'g1_k', 'g1', 'k', -1, 101, 'copied database');

	$node->safe_psql('postgres', 'DROP DATABASE gone');
	is_deeply([ db_files($node, $goneoid) ], [], 'DROP DATABASE removes the files of its indexes');
	$node->safe_psql('postgres', 'DROP DATABASE copied');

	$node->safe_psql('postgres', 'DROP EXTENSION pmhash CASCADE');
	is_deeply([ pmh_files($node) ], [], 'DROP EXTENSION pmhash CASCADE removes every file');
	check_alive($node, $mark, 'DROP DATABASE and DROP EXTENSION');
}

############################################################################
# 3. A CREATE DATABASE that cannot copy the index files leaves nothing.
############################################################################

{
	my $mark = mark($node);
	$node->safe_psql('postgres', 'CREATE DATABASE tpl');
	$node->safe_psql('tpl', 'CREATE EXTENSION pmhash');
	make_table($node, 'tpl', 'g1', 3000, 100);
	my $base = $node->data_dir . '/base';
	my $dirs = sub { opendir(my $dh, $base) or die "opendir $base: $!"; join ' ', sort grep { /^\d+$/ } readdir $dh };
	my $before = $dirs->();
	my $dir = pmhash_dir($node);
	for my $strategy ('wal_log', 'file_copy')
	{
		chmod 0500, $dir or die "chmod $dir: $!";
		my ($rc, $out, $err) = run_sql($node, 'postgres',
			"CREATE DATABASE failed TEMPLATE tpl STRATEGY $strategy");
		chmod 0700, $dir or die "chmod $dir: $!";
		like($err, qr/could not create pmhash file .*Permission denied/,
			"$strategy: CREATE DATABASE fails when pmhash.directory is not writable");
		is($dirs->(), $before, "$strategy: the failed CREATE DATABASE left no directory");
		is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'failed'"),
			0, "$strategy: and no database");
		$node->safe_psql('postgres', "CREATE DATABASE copied TEMPLATE tpl STRATEGY $strategy");
		compare_with_seqscan($node, 'copied', 'g1_k', 'g1', 'k', -1, 101, "$strategy: the next copy");
		$node->safe_psql('postgres', 'DROP DATABASE copied');
	}
	$node->safe_psql('postgres', 'DROP DATABASE tpl');
	check_alive($node, $mark, 'failed CREATE DATABASE');
}

check_whole_logs($node);

done_testing();
