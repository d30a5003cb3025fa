# The syncer's replication slot past max_slot_wal_keep_size, on the msync
# path (where the syncer matters), with writes deferred to the syncer.
#
# 1. A checkpoint that finds the slot too far behind terminates the syncer
#    to invalidate the slot: the syncer makes a last round (so the slot
#    stays valid) and comes back (the postmaster starts it again), holding
#    the slot.
# 2. The slot invalidated while no syncer holds it (the syncer killed, WAL
#    and a checkpoint before the postmaster starts it again), then a crash:
#    the WAL from the durable position is gone, recovery says so, and every
#    index, rebuilt from its table on first use, agrees with a seqscan.
# 3. The slot invalidated again, the syncer back: it makes the slot anew
#    (LOG line), which keeps WAL again: after more deferred writes, a
#    checkpoint and more writes, a crash replays from the new durable
#    position (before the checkpoint's redo point) without rebuilding, and
#    every index agrees with a seqscan.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles qw(change_t check_t);
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;



# The pid of the process holding the syncer's slot, or '' if none does.
sub syncer_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'pmhash_durable'");
}

# The slot's wal_status ('reserved', 'lost', ...).
sub slot_status
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'pmhash_durable'");
}

# Write about three WAL segments of other rows, then a checkpoint.
sub wal_and_checkpoint
{
	my ($node) = @_;
	$node->safe_psql('postgres',
		"INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 20000); "
		  . "SELECT pg_switch_wal(); "
		  . "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 20000); "
		  . "SELECT pg_switch_wal(); CHECKPOINT");
	return;
}

# Kill the syncer (SIGTERM, as a checkpoint does) and invalidate its slot
# before the postmaster starts it again; returns whether the slot is lost.
# Tries a few times, in case the new syncer came first.
sub invalidate_slot
{
	my ($node) = @_;
	for (1 .. 5)
	{
		ok(wait_until(30, sub { syncer_pid($node) ne '' }), 'the syncer holds the slot');
		kill 'TERM', syncer_pid($node);
		ok(wait_until(10, sub { syncer_pid($node) eq '' }), 'the killed syncer released the slot');
		wal_and_checkpoint($node);
		return 1 if slot_status($node) eq 'lost';
	}
	return 0;
}


my $node = new_node('main', dir => 'data', force => 0, init => { allows_streaming => 1 },
	conf => "checkpoint_timeout = 1h\nmax_slot_wal_keep_size = 1MB\npmhash.sync_interval = 60s\n");
start_node($node);
$node->safe_psql('postgres',
	'CREATE EXTENSION pmhash; CREATE TABLE t (id int, k int); '
	  . 'CREATE INDEX t_k ON t USING pmhash (k); CREATE TABLE filler (x text)');
change_t($node);

# 1. a checkpoint terminates the syncer; it comes back
{
	my $name = 'a checkpoint past max_slot_wal_keep_size';
	ok(wait_until(30, sub { syncer_pid($node) ne '' }), "$name: the syncer holds the slot");
	my $old = syncer_pid($node);
	my $offset = log_offset($node);
	change_t($node);
	wal_and_checkpoint($node);
	like(slurp_file($node->logfile, $offset),
		qr/terminating process $old to release replication slot "pmhash_durable"/,
		"$name: terminated the syncer");
	ok(wait_until(30, sub { my $pid = syncer_pid($node); $pid ne '' && $pid ne $old }),
		"$name: a new syncer holds the slot");
	is(slot_status($node), 'reserved', "$name: the slot keeps WAL");
	check_t($node, $name);
}

# 2. the slot invalidated, then a crash before the syncer is back
{
	my $name = 'a crash while the slot is invalidated';
	change_t($node);
	ok(invalidate_slot($node), "$name: the slot is invalidated");
	change_t($node);
	$node->stop('immediate');
	my $offset = log_offset($node);
	start_node($node);
	like(slurp_file($node->logfile, $offset),
		qr/may lack changes whose WAL from \S+ is gone; the index will be rebuilt/,
		"$name: recovery finds the WAL gone and has the index rebuilt");
	check_t($node, $name);
}

# 3. the syncer makes an invalidated slot anew, and recovery replays from it
{
	my $name = 'a crash after the syncer made the slot anew';
	change_t($node);
	my $offset = log_offset($node);
	ok(invalidate_slot($node), "$name: the slot is invalidated");
	ok(wait_until(30, sub { slot_status($node) eq 'reserved' && syncer_pid($node) ne '' }),
		"$name: the syncer holds a slot that keeps WAL");
	like(slurp_file($node->logfile, $offset),
		qr/replication slot "pmhash_durable" was invalidated; the syncer makes it anew/,
		"$name: the syncer says so");
	# keep the syncer from being terminated again, and put a checkpoint
	# between the durable position and the crash: recovery must read the
	# WAL from the durable position, which only the new slot keeps
	$node->safe_psql('postgres',
		'ALTER SYSTEM SET max_slot_wal_keep_size = -1; SELECT pg_reload_conf()');
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	change_t($node);
	$node->safe_psql('postgres', 'SELECT pg_switch_wal(); CHECKPOINT');
	change_t($node);
	$node->stop('immediate');
	$offset = log_offset($node);
	start_node($node);
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/replayed \d+ records from the durable position/,
		"$name: recovery replays from the durable position");
	unlike($log, qr/will be rebuilt/, "$name: nothing is rebuilt");
	check_t($node, $name);
}

# part 2's recovery reports the WAL it could not read
check_log($node, 0, 'the whole run', qr/requested WAL segment \S+ has already been removed/);
$node->stop;

done_testing();
