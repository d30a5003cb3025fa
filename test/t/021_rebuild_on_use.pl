# The rebuild from its table of an index whose file recovery could not
# bring up to date (here: files removed before a crash recovery, as a
# restored base backup without them leaves them), on first use, beside the
# sessions that use the table meanwhile.
#
# 1. Two sessions each plan a query on the table inside a transaction (the
#    planner holds AccessShareLock on the indexes), then both insert a row
#    at once: both inserts finish, neither with a deadlock, one rebuilds
#    (NOTICE "rebuilding pmhash index") while the other waits for it; after
#    both commit, every key of the plain and of the unique index agrees
#    with a seqscan, and pmhash_verify counts each row once (the waiter's
#    row, which the rebuild indexed, is not stored twice).
# 2. An idle transaction that planned a query on the table does not hold
#    the rebuild up, and a seqscan of the table from another session runs
#    while it stays open.
# 3. A 2-client pgbench of single-row inserts inside transactions that plan
#    a query first: no client fails.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles qw(compare_with_seqscan start_session session_sql);
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run ();
use Time::HiRes ();

my $ROWS = 200000;
my $PLAN = 'BEGIN; SELECT count(*) FROM t WHERE id < 0;';
my $next_id = 1000000;    # ids of the rows inserted before each crash

# Lose every index file in a crash: recovery leaves files marked to be
# rebuilt for the indexes whose WAL it could not replay.
sub lose_files
{
	my ($node) = @_;
	$node->safe_psql('postgres',
		"CHECKPOINT; INSERT INTO t SELECT i, i % 1000 FROM generate_series($next_id, $next_id + 9) i");
	$next_id += 10;
	$node->stop('immediate');
	unlink(pmhash_dir($node) . "/$_") or die "unlink $_: $!" for pmh_files($node);
	start_node($node);
	return;
}

# Send SQL to a background session without waiting; $tag marks its end.
sub send_async
{
	my ($session, $sql, $tag) = @_;
	$session->{stdin} .= "$sql\n\\echo '$tag'\n";
	$session->{run}->pump_nb;
	return;
}

# Wait up to $secs seconds for the end of what send_async sent.
sub wait_async
{
	my ($session, $tag, $secs) = @_;
	my $end = time + $secs;
	while ($session->{stdout} !~ /$tag/ && time < $end)
	{
		$session->{run}->pump_nb;
		Time::HiRes::sleep(0.05);
	}
	return $session->{stdout} =~ /$tag/ ? 1 : 0;
}

# Both indexes of t against a seqscan; pmhash_verify counts each row once.
sub check_t
{
	my ($node, $name) = @_;
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1001, "$name, k");
	compare_with_seqscan($node, 'postgres', 't_id', 't', 'id', -3, 1000, "$name, id");
	my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
	is($node->safe_psql('postgres', "SELECT pmhash_verify('t_k')"), $rows,
		"$name: pmhash_verify('t_k') counts every row once");
	is($node->safe_psql('postgres', "SELECT pmhash_verify('t_id')"), $rows,
		"$name: pmhash_verify('t_id') counts every row once");
	return;
}

my $node = new_node('main', dir => 'data', force => 0, conf => "deadlock_timeout = 100ms\n");
start_node($node);
$node->safe_psql('postgres',
	    "CREATE EXTENSION pmhash; CREATE TABLE t (id int, k int); "
	  . "INSERT INTO t SELECT i, i % 1000 FROM generate_series(1, $ROWS) i; "
	  . "CREATE INDEX t_k ON t USING pmhash (k); CREATE UNIQUE INDEX t_id ON t USING pmhash (id)");

# 1. two planned transactions insert at once
{
	lose_files($node);
	my @s = map { start_session($node, 'postgres') } 1 .. 2;
	session_sql($_, $PLAN) for @s;
	send_async($s[0], 'INSERT INTO t VALUES (-1, -1);', 'insert 1 done');
	send_async($s[1], 'INSERT INTO t VALUES (-2, -2);', 'insert 2 done');
	ok(wait_async($s[0], 'insert 1 done', 120) && wait_async($s[1], 'insert 2 done', 120),
		'two planned transactions: both inserts finish');
	my $stderr = join '', map { $_->{stderr} } @s;
	unlike($stderr, qr/deadlock|ERROR/, 'two planned transactions: no deadlock, no error')
	  or diag $stderr;
	like($stderr, qr/NOTICE:  00000: rebuilding pmhash index "t_(k|id)" from table "t"/,
		'two planned transactions: the rebuild is announced');
	session_sql($_, 'COMMIT') for @s;
	$_->quit for @s;
	check_t($node, 'two planned transactions');
}

# 2. an idle transaction that planned a query on the table
{
	lose_files($node);
	my $idle = start_session($node, 'postgres');
	session_sql($idle, $PLAN);
	my $s = start_session($node, 'postgres');
	send_async($s, 'INSERT INTO t VALUES (-3, -3);', 'insert 3 done');
	ok(wait_async($s, 'insert 3 done', 120), 'idle transaction: the insert that rebuilds finishes');
	my ($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM t',
		timeout => 60, timed_out => \my $timed_out);
	ok(!$timed_out && $rc == 0, 'idle transaction: a seqscan from another session runs');
	is($s->{stderr} =~ /ERROR/ ? $s->{stderr} : '', '', 'idle transaction: no error');
	session_sql($idle, 'COMMIT');
	$_->quit for ($idle, $s);
	check_t($node, 'idle transaction');
}

# 3. pgbench: single-row inserts in transactions that plan a query first
{
	lose_files($node);
	my $script = PostgreSQL::Test::Utils::tempdir() . '/insert.sql';
	PostgreSQL::Test::Utils::append_to_file($script,
		    "\\set id random(1000000, 100000000)\n"
		  . "BEGIN;\nSELECT count(*) FROM t WHERE id < 0;\n"
		  . "INSERT INTO t VALUES (:id, :id % 1000) ON CONFLICT DO NOTHING;\nEND;\n");
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ 'pgbench', '-n', '-c', '2', '-t', '50', '-f', $script,
			'-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$stdout, '2>', \$stderr);
	ok($ok, 'pgbench: exits with success') or diag $stderr;
	like($stdout, qr/number of failed transactions: 0 /,
		'pgbench: no transaction failed');
	unlike($stderr, qr/deadlock/, 'pgbench: no deadlock');
	check_t($node, 'pgbench');
}

check_log($node, 0, 'the whole run', qr/was terminated by signal|ERROR:  duplicate key/);
$node->stop;

done_testing();
