# Switching a server between the syncer (wal_level replica, a replication
# slot) and commits that sync their own index changes (wal_level minimal,
# or max_replication_slots = 0), as README's Operations section says a user
# may.  PostgreSQL refuses to start with a physical replication slot under
# those settings, so the postmaster drops the syncer's slot first when
# crash recovery can do without it (src/pmdurable.c).
#
# On the msync path (where the syncer matters): after a clean shutdown,
# after an immediate shutdown (recovery then replays from the durable
# position in pmhash.durable), and with max_replication_slots = 0, the
# server starts with the new settings, the slot is gone, commits sync, and
# every key by index and bitmap scan agrees with a seqscan, also after a
# crash under the new settings; switching back to replica brings the
# syncer and its slot back.  After a crash that lost pmhash.durable, only
# the slot knows the durable position: it is kept, the server refuses the
# new settings with a LOG line that says what to do, and starts with the
# old ones.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles qw(change_t check_t);
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $REPLICA = "wal_level = replica\nmax_wal_senders = 4\nmax_replication_slots = 4\n";
my $MINIMAL = "wal_level = minimal\nmax_wal_senders = 0\n";
my $NO_SLOTS = "wal_level = replica\nmax_wal_senders = 0\nmax_replication_slots = 0\n";
my $SYNCER = qr/commits leave the sync of index changes on ordinary files to the syncer/;
my $SELF = qr/commits sync their index changes themselves/;


# Whether the syncer's slot exists.
sub has_slot
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pmhash_durable'");
}


# Stop the node ($mode), append $conf, start it; returns the new log text.
sub restart_with
{
	my ($node, $mode, $conf, $name) = @_;
	$node->stop($mode);
	$node->append_conf('postgresql.conf', $conf);
	my $offset = log_offset($node);
	start_node($node);
	return slurp_file($node->logfile, $offset);
}

my $node = new_node('main', dir => 'data', force => 0, init => { allows_streaming => 1 },
	conf => "checkpoint_timeout = 1h\n");
start_node($node);
$node->safe_psql('postgres',
	'CREATE EXTENSION pmhash; CREATE TABLE t (id int, k int); '
	  . 'CREATE INDEX t_k ON t USING pmhash (k); '
	  . 'CREATE TABLE th (id int, k int); CREATE INDEX th_k ON th USING hash (k)');
change_t($node);
ok(wait_until(30, sub { has_slot($node) == 1 }), 'replica: the syncer holds its slot');

for my $case ([ 'fast', $MINIMAL, 'wal_level minimal after a clean shutdown' ],
	[ 'immediate', $MINIMAL, 'wal_level minimal after a crash' ],
	[ 'fast', $NO_SLOTS, 'max_replication_slots 0 after a clean shutdown' ])
{
	my ($mode, $conf, $name) = @$case;
	change_t($node);
	my $log = restart_with($node, $mode, $conf, $name);
	like($log, qr/dropped replication slot "pmhash_durable", which this server cannot use/,
		"$name: the postmaster dropped the slot");
	like($log, $SELF, "$name: commits sync");
	like($log, qr/redo starts at/, "$name: crash recovery ran") if $mode eq 'immediate';
	is(has_slot($node), 0, "$name: no slot");
	check_t($node, $name);
	change_t($node);
	$log = restart_with($node, 'immediate', '', "$name, then a crash");
	check_t($node, "$name, then a crash");

	$log = restart_with($node, 'fast', $REPLICA, "$name, back to replica");
	like($log, $SYNCER, "$name, back to replica: the syncer runs");
	ok(wait_until(30, sub { has_slot($node) == 1 }), "$name, back to replica: its slot is back");
	check_t($node, "$name, back to replica");
}

# pmhash.durable lost in a crash: the slot's saved position is all there is
{
	my $name = 'wal_level minimal after a crash that lost pmhash.durable';
	change_t($node);
	$node->stop('immediate');
	unlink pmhash_dir($node) . '/pmhash.durable' or die "unlink: $!";
	$node->append_conf('postgresql.conf', $MINIMAL);
	my $offset = log_offset($node);
	ok(!$node->start(fail_ok => 1), "$name: the server refuses to start");
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/replication slot "pmhash_durable" is kept although wal_level is minimal or max_replication_slots is 0/,
		"$name: pmhash says why the slot is kept");
	like($log, qr/Start the server once with wal_level = replica/, "$name: and what to do");
	$node->append_conf('postgresql.conf', $REPLICA);
	$offset = log_offset($node);
	start_node($node);
	like(slurp_file($node->logfile, $offset),
		qr/crash recovery replays index changes from the position of replication slot "pmhash_durable"/,
		"$name: back on replica, recovery replays from the slot's position");
	check_t($node, "$name, back on replica");
	my $log2 = restart_with($node, 'fast', $MINIMAL, "$name, then a clean shutdown");
	like($log2, qr/dropped replication slot "pmhash_durable"/,
		"$name: after a clean shutdown the switch works");
	check_t($node, "$name, then minimal");
}

check_log($node, 0, 'the whole run', qr/database system is shut down|the database system is starting up/);
$node->stop;

done_testing();
