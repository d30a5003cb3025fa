# Tests of pmhash index files that live shorter than their index or than
# the server: unlogged indexes, empty after crash recovery whatever uses them
# first and kept by a clean restart; temporary indexes, named after their
# backend and removed when the session ends or crashes; and the files of
# indexes whose creation aborts or rolls back, or that are dropped.
# Every answer of an index is compared with a sequential scan, and the
# server must never crash.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery qw(pmhash_dir wait_until);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

############################################################################
# Helpers
############################################################################

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

############################################################################
# The nodes: unlogged indexes on one with its files in the data directory,
# temporary ones on one with its files on /dev/shm.
############################################################################

my $plain = start_new_node('plain', dir => 'default');
my $plaindir = pmhash_dir($plain);
my $node = start_new_node('main', dir => 'shm');
my $dir = pmhash_dir($node);
make_table($node, 'postgres', 't', 20000, 1000);
my $dboid = $node->safe_psql('postgres',
	'SELECT oid FROM pg_database WHERE datname = current_database()');

############################################################################
# 1. Unlogged indexes: empty after crash recovery, kept by a clean restart.
############################################################################

{
	my $node = $plain;
	make_table($node, 'postgres', $_, 5000, 200, 'UNLOGGED') for qw(u u2 u3);
	my $s = start_session($node, 'postgres');
	session_ok($s, 'CREATE TEMP TABLE crash_tmp (k int); '
		  . 'CREATE INDEX crash_tmp_k ON crash_tmp USING pmhash (k);', 'temp index');
	my $tmpfile = session_ok($s, file_sql('crash_tmp_k'), 'temp file name');
	ok(-e "$plaindir/$tmpfile", "temporary index file $tmpfile exists");
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
	ok(wait_until(20, sub { !-e "$plaindir/$tmpfile" }),
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
# 2. Temporary indexes, and files of aborted or dropped indexes.
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

check_whole_logs($node, $plain);

done_testing();
