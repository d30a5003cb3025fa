# Tests of pmhash index files and their life cycle, seen from outside the
# server: loading without shared_preload_libraries, file names and modes,
# missing, damaged, foreign and truncated files, the orphan cleaner,
# unlogged indexes across crash recovery, temporary indexes, aborted
# creations, indexes moved to another tablespace or copied with a database,
# the removal of files by DROP DATABASE and DROP EXTENSION, and a second
# cluster refused the directory of a running one.
# Every error is checked by SQLSTATE and message, every answer of an index
# is compared with a sequential scan, and the server must never crash.
use strict;
use warnings;

use File::Copy qw(copy);
use File::Temp ();
use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery qw(wait_until);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my %dir_of;    # node name => absolute pmhash.directory

############################################################################
# Helpers
############################################################################

# Create and start a node; preload => 0 leaves pmhash out of
# shared_preload_libraries, shm => 1 puts pmhash.directory on /dev/shm.
sub start_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'pmhash'")
	  if $opt{preload} // 1;
	if ($opt{shm})
	{
		my $dir = File::Temp::tempdir("pmhash_${name}_XXXX", DIR => '/dev/shm', CLEANUP => 1);
		$node->append_conf('postgresql.conf', "pmhash.directory = '$dir'");
		$dir_of{$name} = $dir;
	}
	else
	{
		$dir_of{$name} = $node->data_dir . '/pmhash';
	}
	$node->start;
	return $node;
}

# Absolute path of an index's file.
sub index_path
{
	my ($node, $db, $index) = @_;
	return "$dir_of{$node->name}/" . $node->safe_psql($db, file_sql($index));
}

# Sorted file names of every pmhash index of a database the session can see.
sub all_index_files
{
	my ($node, $db) = @_;
	return sort split /\n/, $node->safe_psql($db, files_sql('true'));
}

# Sorted names of the .pmh files in a directory.
sub pmh_files
{
	my ($dir) = @_;
	opendir(my $dh, $dir) or return ();
	my @files = sort grep { /\.pmh$/ } readdir $dh;
	closedir $dh;
	return @files;
}

# Sorted names of the .pmh files of one database in a directory.
sub db_files
{
	my ($dir, $dboid) = @_;
	return grep { /^(?:t\d+_)?${dboid}_\d+\.pmh$/ } pmh_files($dir);
}

# Permission bits of a file, as an octal string.
sub file_mode
{
	my ($path) = @_;
	my @st = stat $path or return 'missing';
	return sprintf '%04o', $st[2] & 07777;
}

# SQL listing, for every key from $from to $to, the ids of the rows having it.
sub probe_sql
{
	my ($table, $col, $from, $to) = @_;
	return "SELECT string_agg(v || ':' || coalesce((SELECT string_agg(id::text, ',' ORDER BY id) "
	  . "FROM $table WHERE $col = v), '-'), ' ' ORDER BY v) FROM generate_series($from, $to) v";
}

# Check that index scans of $index find what a seqscan finds for keys
# $from..$to; with allow_damaged, an XX002 error is accepted instead.
sub compare_with_seqscan
{
	my ($node, $db, $index, $table, $col, $from, $to, $name, %opt) = @_;
	my $sql = probe_sql($table, $col, $from, $to);
	like($node->safe_psql($db, "$FORCE_INDEX EXPLAIN (COSTS OFF) $sql"),
		qr/Index Scan using \Q$index\E /, "$name: the plan uses $index");
	my $via_seq = $node->safe_psql($db, "$FORCE_SEQ $sql");
	like($via_seq, qr/\d+:\d/, "$name: the table has rows to find");
	my ($rc, $via_index, $err) = run_sql($node, $db, "$FORCE_INDEX $sql");
	if ($rc != 0 && $opt{allow_damaged})
	{
		note "$name: index scans report: $err";
		check_error_report($err, damaged($index, qr/./), "$name: index scan error");
		return;
	}
	is($rc, 0, "$name: index scans succeed") or diag $err;
	is($via_index, $via_seq, "$name: index scans agree with a seqscan");
}

# Number of non-null keys of a column.
sub key_count
{
	my ($node, $db, $table, $col) = @_;
	return $node->safe_psql($db, "SELECT count($col) FROM $table");
}

# REINDEX an index and check that it is sound and agrees with a seqscan.
sub reindex_and_check
{
	my ($node, $db, $index, $table, $col, $from, $to, $name) = @_;
	my ($rc, $out, $err) = run_sql($node, $db, "REINDEX INDEX $index");
	is($rc, 0, "$name: REINDEX succeeds") or diag $err;
	compare_with_seqscan($node, $db, $index, $table, $col, $from, $to, "$name after REINDEX");
	is($node->safe_psql($db, "SELECT pmhash_verify('$index')"),
		key_count($node, $db, $table, $col), "$name: pmhash_verify passes after REINDEX");
}

# Stop the server, change an index's file with $mutate->($path), start again.
sub change_file_offline
{
	my ($node, $db, $index, $mutate) = @_;
	my $path = index_path($node, $db, $index);
	$node->stop;
	$mutate->($path);
	$node->start;
	return $path;
}

# Create a table (id int, k int) with $rows rows, keys id % $keys, and a pmhash index on k.
sub make_table
{
	my ($node, $db, $table, $rows, $keys, $kind) = @_;
	$kind //= '';
	$node->safe_psql($db,
		    "CREATE $kind TABLE $table (id int, k int); "
		  . "INSERT INTO $table SELECT i, i % $keys FROM generate_series(1, $rows) i; "
		  . "CREATE INDEX ${table}_k ON $table USING pmhash (k);");
}

# Check the file of an index: named after its relfilenode, mode 0600,
# reported by pmhash_stats.
sub check_file_identity
{
	my ($node, $db, $index, $name) = @_;
	my ($dbo, $filenode) = split /\|/, $node->safe_psql($db,
		"SELECT d.oid, pg_relation_filenode('$index') "
		  . 'FROM pg_database d WHERE datname = current_database()');
	my $path = "$dir_of{$node->name}/${dbo}_${filenode}.pmh";
	ok(-f $path, "$name: file $path exists");
	is(file_mode($path), '0600', "$name: file mode is 0600");
	my $reported = $node->safe_psql($db, "SELECT path FROM pmhash_stats('$index')");
	$reported = $node->data_dir . "/$reported" unless $reported =~ m{^/};
	is($reported, $path, "$name: pmhash_stats reports that file");
}

# After crash recovery, check a reset unlogged index: its first use ($first)
# gives $want, then new rows are found through it and pmhash_verify passes.
sub check_reset_unlogged
{
	my ($node, $table, $first, $want, $name) = @_;
	my ($rc, $out, $err) = run_sql($node, 'postgres', $first);
	is($rc, 0, "$name: first use succeeds") or diag $err;
	is($out, $want, "$name: first use gives the empty index's answer");
	($rc, $out, $err) = run_sql($node, 'postgres',
		"INSERT INTO $table SELECT i, i % 300 FROM generate_series(1, 3000) i");
	is($rc, 0, "$name: INSERT succeeds") or diag $err;
	compare_with_seqscan($node, 'postgres', "${table}_k", $table, 'k', -1, 301, $name);
	my $verify;
	($rc, $verify, $err) = run_sql($node, 'postgres', "SELECT pmhash_verify('${table}_k')");
	is($verify, '3000', "$name: pmhash_verify passes") or diag $err;
}

# Check that a moved index still answers like a seqscan and that the files
# of the database are exactly those of its indexes; then REINDEX it.
sub check_moved
{
	my ($node, $db, $index, $table, $name) = @_;
	compare_with_seqscan($node, $db, $index, $table, 'k', -1, 101, $name);
	my $dboid = $node->safe_psql($db,
		'SELECT oid FROM pg_database WHERE datname = current_database()');
	is_deeply([ db_files($dir_of{$node->name}, $dboid) ],
		[ all_index_files($node, $db) ], "$name: the files are exactly those of the indexes");
	reindex_and_check($node, $db, $index, $table, 'k', -1, 101, $name);
}

############################################################################
# 1. Without shared_preload_libraries, CREATE EXTENSION explains what to do.
# The same node then runs with pmhash.directory at its default (in the data
# directory) for the unlogged tests of case 9.
############################################################################

my $plain = start_node('plain', preload => 0);
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

my $node = start_node('main', shm => 1);
my $dir = $dir_of{main};
$node->safe_psql('postgres', 'CREATE EXTENSION pmhash');
make_table($node, 'postgres', 't', 20000, 1000);
make_table($node, 'postgres', 'small', 300, 30);
my $dboid = $node->safe_psql('postgres',
	'SELECT oid FROM pg_database WHERE datname = current_database()');

check_file_identity($node, 'postgres', 't_k', 'file on /dev/shm');
is_deeply([ pmh_files($dir) ], [ all_index_files($node, 'postgres') ],
	'pmhash.directory holds exactly the files of the existing indexes');
compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'fresh index');

$plain->safe_psql('postgres', 'CREATE EXTENSION pmhash');
make_table($plain, 'postgres', 'logged', 2000, 100);
check_file_identity($plain, 'postgres', 'logged_k', 'file in the data directory');
like($dir_of{plain}, qr{/pmhash$}, 'default pmhash.directory is inside the data directory');

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
	is_deeply([ pmh_files($dir) ], [ all_index_files($node, 'postgres') ],
		'the refused cluster left the files alone');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'after the refused start');
}

############################################################################
# 3. A missing file: errors naming the file with a REINDEX hint, no crash.
############################################################################

{
	my $path = change_file_offline($node, 'postgres', 't_k', sub { unlink $_[0] or die $! });
	my $mark = mark($node);
	my $missing = {
		state => '58P01',
		msg => qr/could not open file "\Q$path\E" of pmhash index "t_k": No such file or directory/,
		hint => reindex_hint('t_k')
	};
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		$missing, 'index scan with a missing file');
	expect_error($node, 'postgres', 'INSERT INTO t VALUES (30001, 7)',
		$missing, 'INSERT with a missing file');
	is($node->safe_psql('postgres', "$FORCE_SEQ SELECT count(*) FROM t WHERE id > 20000"),
		'0', 'the failed INSERT added no row');
	ok(!-e $path, 'no file was created behind the index\'s back');
	check_alive($node, $mark, 'missing file');
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'missing file');
}

############################################################################
# 4. A damaged file header.
############################################################################

for my $case (
	[
		'magic overwritten', sub { write_bytes($_[0], 0, 'NOTPMHSH') },
		qr/file header has a wrong magic number/
	],
	[
		'identity byte changed', sub { change_byte($_[0], 24, sub { $_[0] ^ 0x01 }) },
		qr/file header checksum mismatch/
	],
	[
		'format version of an older build (22-slot buckets)',
		sub { write_bytes($_[0], 8, pack('V', 1)) },
		qr/file format version is not supported/
	])
{
	my ($what, $mutate, $detail) = @$case;
	my $path = change_file_offline($node, 'postgres', 't_k', $mutate);
	my $mark = mark($node);
	my $want = damaged('t_k', qr/File "\Q$path\E": $detail/);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		$want, "header $what: index scan");
	expect_error($node, 'postgres', 'INSERT INTO t VALUES (30001, 7)', $want,
		"header $what: INSERT");
	expect_error($node, 'postgres', "SELECT pmhash_verify('t_k')", $want,
		"header $what: pmhash_verify");
	check_alive($node, $mark, "header $what");
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, "header $what");
}

############################################################################
# 5. Damaged segments in the middle of the file.
############################################################################

make_table($node, 'postgres', 'dup', 6000, 20);
$node->safe_psql('postgres',
	'INSERT INTO dup SELECT i, i FROM generate_series(100, 3000) i');
cmp_ok($node->safe_psql('postgres', "SELECT chains FROM pmhash_stats('dup_k')"),
	'>', 0, 'the duplicate-heavy index has posting chains');

for my $case (
	[
		'segment header byte',
		sub { change_byte($_[0], $_[1]{unit} * $UNIT + 16, sub { $_[0] ^ 0xFF }) },
		qr/shard \d+: segment at unit \d+ is damaged/
	],
	[
		'reserved bits of a bucket commit word',
		sub { change_byte($_[0], ($_[1]{unit} + 1) * $UNIT + 3, sub { $_[0] | 0x80 }) },
		qr/shard \d+ bucket 0: reserved commit bits are set/
	],
	[
		'length of a posting chain',
		sub {
			write_bytes($_[0], ($_[1]{unit} + 1 + $_[1]{nbuckets}) * $UNIT + 28,
				pack('v', 0));
		},
		qr/shard \d+: posting block 0 does not start a chain that fits/
	],
	[
		'directory entry',
		sub { write_bytes($_[0], $_[1]{dir_entry}, pack('Q<', (1 << 40) - 1 | (7 << 40))) },
		qr/shard \d+: directory entry points outside the file/
	])
{
	my ($what, $mutate, $detail) = @$case;
	change_file_offline($node, 'postgres', 'dup_k',
		sub { $mutate->($_[0], find_segment($_[0], 1)) });
	my $mark = mark($node);
	expect_error($node, 'postgres', "SELECT pmhash_verify('dup_k')",
		damaged('dup_k', $detail), "damaged $what: pmhash_verify");
	compare_with_seqscan($node, 'postgres', 'dup_k', 'dup', 'k', -2, 3002,
		"damaged $what", allow_damaged => 1);
	check_alive($node, $mark, "damaged $what");
	reindex_and_check($node, 'postgres', 'dup_k', 'dup', 'k', -2, 3002, "damaged $what");
}

############################################################################
# 6. A file copied from another index, or from another build of the same one.
############################################################################

{
	my $other = index_path($node, 'postgres', 'small_k');
	ok(-s $other != -s index_path($node, 'postgres', 't_k'), 'the two files differ in size');
	my $path = change_file_offline($node, 'postgres', 't_k',
		sub { copy($other, $_[0]) or die "copy: $!" });
	my $mark = mark($node);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		damaged('t_k', qr/File "\Q$path\E": The file belongs to another relation/),
		'file of another index');
	compare_with_seqscan($node, 'postgres', 'small_k', 'small', 'k', -1, 31,
		'the index whose file was copied');
	check_alive($node, $mark, 'file of another index');
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'file of another index');
}

{
	# TRUNCATE of a table created in the same transaction rebuilds its
	# indexes in place: same relfilenode, new build.
	my $saved = PostgreSQL::Test::Utils::tempdir() . '/old_build.pmh';
	my $s = start_session($node, 'postgres');
	session_ok($s,
		    'BEGIN; CREATE TABLE gen (id int, k int); '
		  . 'INSERT INTO gen SELECT i, i % 100 FROM generate_series(1, 3000) i; '
		  . 'CREATE INDEX gen_k ON gen USING pmhash (k);', 'first build');
	my $name = session_ok($s, file_sql('gen_k'), 'file name of the first build');
	copy("$dir/$name", $saved) or die "copy: $!";
	session_ok($s,
		    'TRUNCATE gen; INSERT INTO gen SELECT i, i % 50 FROM generate_series(1, 2000) i; '
		  . 'COMMIT;', 'second build');
	$s->quit;
	is($node->safe_psql('postgres', file_sql('gen_k')), $name,
		'the second build kept the relfilenode');
	my $path = change_file_offline($node, 'postgres', 'gen_k',
		sub { copy($saved, $_[0]) or die "copy: $!" });
	my $mark = mark($node);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM gen WHERE k = 7",
		damaged('gen_k', qr/File "\Q$path\E": The file does not belong to this build/),
		'file of an older build');
	check_alive($node, $mark, 'file of an older build');
	reindex_and_check($node, 'postgres', 'gen_k', 'gen', 'k', -1, 51, 'file of an older build');
}

############################################################################
# 7. A file truncated under a live session: an ERROR, not a crash.
############################################################################

{
	my $mark = mark($node);
	my $path = index_path($node, 'postgres', 't_k');
	my $s = start_session($node, 'postgres');
	session_ok($s, $FORCE_INDEX, 'force index scans');
	my $count = $node->safe_psql('postgres', "$FORCE_SEQ SELECT count(*) FROM t WHERE k = 7");
	is(session_ok($s, 'SELECT count(*) FROM t WHERE k = 7', 'scan before truncation'),
		$count, 'index scan before truncation');
	truncate($path, 0) or die "truncate: $!";
	my $sigbus = {
		state => 'XX002',
		msg => qr/pmhash index "t_k" could not read its file/,
		hint => reindex_hint('t_k')
	};
	my ($out, $err) = session_sql($s, 'SELECT count(*) FROM t WHERE k = 7');
	check_error_report($err, $sigbus, 'index scan of a truncated file');
	($out, $err) = session_sql($s, 'INSERT INTO t VALUES (30002, 7)');
	check_error_report($err, $sigbus, 'INSERT into a truncated file');
	is(session_ok($s, 'SELECT 1', 'session after the errors'), '1', 'the session survives');
	is(session_ok($s, 'SELECT count(*) FROM t WHERE id > 20000', 'row count'),
		'0', 'the failed INSERT added no row');
	session_ok($s, 'REINDEX INDEX t_k', 'REINDEX in the same session');
	is(session_ok($s, 'SELECT count(*) FROM t WHERE k = 7', 'scan after REINDEX'),
		$count, 'the session finds the rows after REINDEX');
	$s->quit;
	check_alive($node, $mark, 'truncated file');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'truncated file repaired');
}

############################################################################
# 8. The file cleaner removes orphaned files, and nothing else.
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
# 9. Unlogged indexes: empty after crash recovery, kept by a clean restart.
############################################################################

{
	my $node = $plain;
	make_table($node, 'postgres', $_, 5000, 200, 'UNLOGGED') for qw(u u2 u3);
	my $s = start_session($node, 'postgres');
	session_ok($s, 'CREATE TEMP TABLE crash_tmp (k int); '
		  . 'CREATE INDEX crash_tmp_k ON crash_tmp USING pmhash (k);', 'temp index');
	my $tmpfile = session_ok($s, file_sql('crash_tmp_k'), 'temp file name');
	ok(-e "$dir_of{plain}/$tmpfile", "temporary index file $tmpfile exists");
	$node->stop('immediate');
	$s->quit;
	$node->start;
	my $mark = mark($node);

	is($node->safe_psql('postgres', 'SELECT count(*) FROM u'), '0',
		'crash recovery emptied the unlogged table');
	check_reset_unlogged($node, 'u',
		"$FORCE_INDEX SELECT count(*) FROM u WHERE k = 7; SELECT entries FROM pmhash_stats('u_k')",
		"0\n0", 'unlogged index first used by a scan');
	check_reset_unlogged($node, 'u2', "SELECT pmhash_verify('u2_k')",
		'0', 'unlogged index first used by pmhash_verify');
	check_reset_unlogged($node, 'u3',
		"BEGIN; $FORCE_INDEX SELECT count(*) FROM u3 WHERE k = 7; ROLLBACK;",
		'0', 'unlogged index first used in a rolled back transaction');
	ok(wait_until(20, sub { !-e "$dir_of{plain}/$tmpfile" }),
		'the file of a temporary index of a crashed session is removed');
	check_alive($node, $mark, 'unlogged after crash');

	$node->restart;
	is($node->safe_psql('postgres', 'SELECT count(*) FROM u'), '3000',
		'a clean restart keeps the unlogged rows');
	compare_with_seqscan($node, 'postgres', 'u_k', 'u', 'k', -1, 301,
		'unlogged after a clean restart');
	is($node->safe_psql('postgres', "SELECT pmhash_verify('u_k')"), '3000',
		'pmhash_verify passes after a clean restart');
}

############################################################################
# 10. Temporary indexes, and files of aborted or dropped indexes.
############################################################################

{
	my $mark = mark($node);
	my $s = start_session($node, 'postgres');
	session_ok($s, 'CREATE TEMP TABLE tt AS SELECT i AS id, i % 50 AS k '
		  . 'FROM generate_series(1, 2000) i; CREATE INDEX tt_k ON tt USING pmhash (k);',
		'temp index');
	my $backend = session_ok($s,
		"SELECT substring(nspname from 'pg_temp_(\\d+)') FROM pg_namespace "
		  . 'WHERE oid = pg_my_temp_schema()', 'backend id');
	my $filenode = session_ok($s, "SELECT pg_relation_filenode('tt_k')", 'relfilenode');
	my $tfile = "t${backend}_${dboid}_${filenode}.pmh";
	is(session_ok($s, file_sql('tt_k'), 'file name'), $tfile,
		'the temp index file is named t<backend>_<db>_<relfilenode>.pmh');
	ok(-e "$dir/$tfile", 'the temp index file exists while the session lives');
	is(file_mode("$dir/$tfile"), '0600', 'the temp index file has mode 0600');
	is(session_ok($s, "$FORCE_INDEX SELECT count(*) FROM tt WHERE k = 7", 'temp scan'),
		'40', 'an index scan of the temp index finds the rows');

	# files of indexes that an abort, a rollback to savepoint or a DROP removes
	for my $step (
		[ 'aborted CREATE INDEX', 'BEGIN; CREATE INDEX t_id ON t USING pmhash (id);',
			't_id', 'ROLLBACK' ],
		[ 'aborted temp CREATE INDEX', 'BEGIN; CREATE INDEX tt_id ON tt USING pmhash (id);',
			'tt_id', 'ROLLBACK' ],
		[
			'rolled back subtransaction',
			'BEGIN; SAVEPOINT a; CREATE INDEX t_id ON t USING pmhash (id);',
			't_id', 'ROLLBACK TO a; COMMIT'
		],
		[ 'dropped temp index', 'CREATE INDEX tt_id ON tt USING pmhash (id);',
			'tt_id', 'DROP INDEX tt_id' ],
		[ 'dropped index', 'CREATE INDEX t_id ON t USING pmhash (id);',
			't_id', 'DROP INDEX t_id' ])
	{
		my ($what, $create, $index, $undo) = @$step;
		session_ok($s, $create, "$what: create");
		my $file = session_ok($s, file_sql($index), "$what: file name");
		ok(-e "$dir/$file", "$what: $file exists");
		session_ok($s, $undo, "$what: undo");
		ok(!-e "$dir/$file", "$what: $file is removed");
	}

	# a DROP that rolls back keeps the file
	my $kept = index_path($node, 'postgres', 't_k');
	session_ok($s, 'BEGIN; DROP INDEX t_k; ROLLBACK;', 'rolled back DROP INDEX');
	ok(-e $kept, 'a rolled back DROP INDEX keeps the file');

	$s->quit;
	ok(wait_until(10, sub { !-e "$dir/$tfile" }),
		'the temp index file is removed when the session ends');
	check_alive($node, $mark, 'temporary indexes');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002,
		'after the temporary index tests');
}

############################################################################
# 11. Moving indexes to another tablespace (core copies the main fork only).
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
# 12. DROP DATABASE and DROP EXTENSION leave no file behind.
############################################################################

{
	my $mark = mark($node);
	$node->safe_psql('postgres', 'CREATE DATABASE gone');
	$node->safe_psql('gone', 'CREATE EXTENSION pmhash');
	make_table($node, 'gone', 'g1', 3000, 100);
	make_table($node, 'gone', 'g2', 100, 10);
	my $goneoid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'gone'");
	is(scalar(() = db_files($dir, $goneoid)), 2, 'the database has two index files');

	# a copy of the database gets copies of the files, and its indexes work
	$node->safe_psql('postgres', 'CREATE DATABASE copied TEMPLATE gone');
	my $copiedoid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'copied'");
	is(scalar(() = db_files($dir, $copiedoid)), 2, 'CREATE DATABASE copies the two index files');
	compare_with_seqscan($node, 'copied', 'g1_k', 'g1', 'k', -1, 101, 'copied database');
	is($node->safe_psql('copied', "SELECT pmhash_verify('g1_k') = (SELECT count(k) FROM g1)"),
		't', 'copied database: pmhash_verify passes');
	reindex_and_check($node, 'copied', 'g1_k', 'g1', 'k', -1, 101, 'copied database');

	$node->safe_psql('postgres', 'DROP DATABASE gone');
	is_deeply([ db_files($dir, $goneoid) ], [], 'DROP DATABASE removes the files of its indexes');
	$node->safe_psql('postgres', 'DROP DATABASE copied');

	$node->safe_psql('postgres', 'DROP EXTENSION pmhash CASCADE');
	is_deeply([ pmh_files($dir) ], [], 'DROP EXTENSION pmhash CASCADE removes every file');
	check_alive($node, $mark, 'DROP DATABASE and DROP EXTENSION');

	$plain->safe_psql('postgres', 'DROP EXTENSION pmhash CASCADE');
	is_deeply([ pmh_files($dir_of{plain}) ], [],
		'DROP EXTENSION pmhash CASCADE removes every file in the data directory');
}

$node->stop;
$plain->stop;
for my $n ($node, $plain)
{
	unlike(slurp_file($n->logfile), qr/terminated by signal|PANIC|TRAP:/,
		'no crash in the whole log of node ' . $n->name);
}

done_testing();
