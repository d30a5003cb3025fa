# Operating system crashes of the msync path, simulated.
#
# Two nodes keep their index files in their data directories on the
# ordinary file system (msync path, PMEM_IS_PMEM_FORCE=0) with
# pmhash.os_crash_shadows on, and crash as PmhashOsCrash simulates: the
# index files keep only what pmhash synced (and some pages the OS may have
# written back), PostgreSQL's own files everything but its WAL buffers.
# The nodes differ in wal_level: on replica the syncer makes index changes
# durable behind the commits and crash recovery replays pmhash's WAL from
# its durable position (src/README, The syncer); on minimal the syncer
# cannot keep WAL (no replication slot) and commits msync.
#
# Each node goes through 10 cycles of a pgbench load of inserts (growth, a
# heavy key with posting chains), deletes, updates, probes, VACUUM and
# CHECKPOINT for a few seconds, then a crash: in odd cycles right after a
# CHECKPOINT (PostgreSQL then replays nothing before it, and often nothing
# at all: "redo is not required"), in even ones at a random moment.  After
# each restart every key by index scan and by bitmap scan must find the
# rows a seqscan finds (no lost entry, no row twice), pmhash_verify must
# pass, and the same after a VACUUM, when pmhash_verify counts exactly
# the non-null keys (VACUUM removed the entries of rows lost with the WAL
# buffers, also those whose TIDs the workload reused).  The simulations must
# have taken away unsynced pages, and recoveries on replica must have
# replayed records from the durable position.  Last, a fast shutdown under
# the load and an OS crash after it: no recovery, and exact results; and a
# commit after the syncer, terminated, made its last round, then a fast
# shutdown before it is started again, and an OS crash.  Two
# crashes of replica right after a CHECKPOINT also lose pmhash.durable
# (removed, then overwritten with random bytes): recovery must replay from
# the position of the syncer's replication slot instead; and if the WAL
# from the durable position is gone, rebuild every index.  The
# test fails when commits do not sync (minimal), when the syncer does not
# fsync or recovery does not replay from the durable position (replica),
# each checked by removing it, and when pmhash does not flag entries
# after a crash that needs no redo.
# PMHASH_TEST_SEED sets the seed of the random moments and pages.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles qw(crc32c);
use PmhashOsCrash;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $seed = $ENV{PMHASH_TEST_SEED} // time;
srand $seed;
note "random seed $seed (set PMHASH_TEST_SEED to repeat)";

my $CYCLES = 10;
my $no_redo = 0;         # recoveries where PostgreSQL ran no redo
my %lost_pages;          # node name => pages the simulations took back to their shadow

# Simulate an OS crash of a node (os_crash) and count the pages it lost.
sub os_crash_counted
{
	my ($node, @how) = @_;
	my ($what, $lost) = os_crash($node, @how);
	$lost_pages{ $node->name } += $lost;
	return $what;
}

my %nodes = (
	replica => new_node('replica', dir => 'data', force => 0, init => { allows_streaming => 1 },
		conf => "pmhash.os_crash_shadows = on\ncheckpoint_timeout = 1h\n"),
	minimal => new_node('minimal', dir => 'data', force => 0,
		conf => "pmhash.os_crash_shadows = on\ncheckpoint_timeout = 1h\n"
		  . "shared_buffers = 64MB\nwal_buffers = 16MB\nwal_writer_delay = 10s\n"));
for my $name (sort keys %nodes)
{
	my $node = $nodes{$name};
	start_workload_node($node, 0);
	my $shadows = () = glob(pmhash_dir($node) . '/*.pmh.shadow');
	is($shadows, 3, "$name: each index file has a shadow");
}
like(slurp_file($nodes{replica}->logfile),
	qr/pmhash: commits leave the sync of index changes on ordinary files to the syncer/,
	'replica: the syncer runs');
like(slurp_file($nodes{minimal}->logfile),
	qr/pmhash: commits sync their index changes themselves/,
	'minimal: commits sync (no replication slot for the syncer)');
my $replayed = 0;        # records replayed from the durable position on replica

for my $cycle (1 .. 2 * $CYCLES)
{
	my $node = $nodes{ (sort keys %nodes)[ $cycle % 2 ] };
	my $after_checkpoint = int(($cycle + 1) / 2) % 2;
	my $name = $node->name . ' cycle ' . int(($cycle + 1) / 2)
	  . ($after_checkpoint ? ' (right after a CHECKPOINT)' : ' (random moment)');
	# two crashes of replica right after a CHECKPOINT also lose pmhash.durable
	my $durable = $node->name eq 'replica' && $after_checkpoint
	  ? { 3 => 'missing', 7 => 'damaged' }->{ int(($cycle + 1) / 2) } : undef;
	$name .= ", pmhash.durable $durable" if $durable;
	my $offset = log_offset($node);
	my $load = start_crash_load($node);
	Time::HiRes::sleep(2 + rand(2));
	$node->safe_psql('postgres', 'CHECKPOINT') if $after_checkpoint;
	my $what = os_crash_counted($node, 'immediate', $durable);
	note "$name: $what";
	finish_crash_load($node, $name, $load);
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/database system was interrupted|not properly shut down/,
		"$name: the node went through crash recovery");
	like($log, qr/pmhash\.durable" is missing or damaged; crash recovery replays index changes from the position of replication slot "pmhash_durable"|pmhash\.durable" is missing or damaged, and replication slot "pmhash_durable" has lost its WAL/,
		"$name: recovery fell back on the replication slot") if $durable;
	$no_redo++ if $log =~ /redo is not required/;
	$replayed += $1 while $log =~ /pmhash: replayed (\d+) records from the durable position/g;
	check_node($node, $name, 1);
	check_log($node, $offset, $name);
}
for my $name (sort keys %nodes)
{
	cmp_ok($lost_pages{$name} // 0, '>', 0,
		"$name: the simulated crashes took away " . ($lost_pages{$name} // 0) . ' unsynced pages');
	like($nodes{$name}->safe_psql('postgres', q{SELECT shards || ' ' || chains FROM pmhash_stats('rt_k')}),
		qr/^\d+ [1-9]/, "$name: rt_k grew posting chains");
}
note "PostgreSQL needed no redo after $no_redo of the crashes";
cmp_ok($replayed, '>', 0,
	"replica: recoveries replayed $replayed records from the syncer's durable position");

# A fast shutdown under the load, then an OS crash: the syncer's last round
# and the backends' exits must have made every change durable, for no
# recovery follows a shutdown checkpoint.
{
	my $node = $nodes{replica};
	my $offset = log_offset($node);
	my $load = start_crash_load($node);
	Time::HiRes::sleep(2 + rand(2));
	my $what = os_crash_counted($node, 'fast');
	note "fast shutdown: $what (pages of transactions the shutdown cut short need not be durable)";
	finish_pgbench($_) for @{ $load->{runs} };
	unlike(slurp_file($node->logfile, $offset), qr/database system was interrupted|not properly shut down/,
		'fast shutdown: no crash recovery');
	check_node($node, 'fast shutdown', 1);
	check_log($node, $offset, 'fast shutdown');
}

# A commit after the syncer's last round.  The syncer, terminated (as an
# administrator or max_slot_wal_keep_size does), makes a last round and
# exits; a fast shutdown within the 5 s before the postmaster starts it
# again leaves no syncer to make another.  A commit in between must sync
# its own changes (the syncer cleared the defer floor), and the exit of its
# backend must not leave them to a syncer either; then an OS crash.
{
	my $node = $nodes{replica};
	my $offset = log_offset($node);
	my $syncer = q{SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'pmhash_durable'};
	my $pid = $node->safe_psql('postgres', $syncer);
	like($pid, qr/^\d+$/, 'syncer stopped: the syncer holds its slot');
	my $stopped = Time::HiRes::time();
	kill 'TERM', $pid;
	ok(wait_until(4, sub { $node->safe_psql('postgres', $syncer) eq '' }),
		'syncer stopped: the terminated syncer released its slot');
	$node->safe_psql('postgres',
		'INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, 500)');
	$node->stop('fast');
	my $seconds = Time::HiRes::time() - $stopped;
	my $log = slurp_file($node->logfile, $offset);
	unlike($log, qr/commits leave the sync of index changes on ordinary files to the syncer/,
		sprintf('syncer stopped: no syncer started again before the shutdown (%.1f s)', $seconds));
	my $what = os_crash_counted($node, 'fast');
	note "syncer stopped, then a commit and a fast shutdown: $what";
	check_node($node, 'commit after the syncer stopped', 1);
	check_log($node, $offset, 'commit after the syncer stopped');
}

# The WAL from the durable position gone: after a crash, pmhash.durable
# names a position whose WAL segment checkpoints have since removed (as
# when the slot was dropped or invalidated).  Recovery cannot replay from
# there, so it must rebuild every index from its table, and say so.
{
	my $node = $nodes{replica};
	my $old = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	my $segment = $node->safe_psql('postgres', "SELECT pg_walfile_name('$old')");
	$node->safe_psql('postgres', 'CREATE TABLE wal_fill (x int)');
	for (1 .. 4)
	{
		$node->safe_psql('postgres', 'INSERT INTO wal_fill SELECT generate_series(1, 1000)');
		$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
		Time::HiRes::sleep(1.5);    # a syncer round, which moves the slot on
		$node->safe_psql('postgres', 'CHECKPOINT');
	}
	ok(!-e $node->data_dir . "/pg_wal/$segment", "WAL gone: segment $segment was removed");
	my $offset = log_offset($node);
	my $load = start_crash_load($node);
	Time::HiRes::sleep(2);
	$node->stop('immediate');
	my ($hi, $lo) = map { hex } split m{/}, $old;
	my $position = $hi * 2**32 + $lo;
	my $durable = '';
	for my $sequence (1_000_000, 1_000_001)
	{
		my $fields = pack('Q<Q<', $sequence, $position);
		my $slot = pack('L<L<', 0x504d4844, crc32c($fields)) . $fields;
		$durable .= $slot . ("\0" x (512 - length($slot)));
	}
	write_file(pmhash_dir($node) . '/pmhash.durable', $durable);
	start_node($node);
	finish_crash_load($node, 'WAL gone', $load);
	like(slurp_file($node->logfile, $offset),
		qr/pmhash: ".*" may lack changes whose WAL from \Q$old\E is gone; the index will be rebuilt/,
		'WAL gone: recovery marks the index files to be rebuilt');
	check_node($node, 'WAL gone', 1);
	check_log($node, $offset, 'WAL gone', qr/requested WAL segment .* has already been removed|could not (open|read) file/);
}

# A crash that needs no redo, on purpose (wal_level minimal: no standby
# snapshot follows the checkpoint): after a CHECKPOINT, one open
# transaction inserts enough rows for its index to grow (a rebuild syncs
# its entries at once), while its WAL stays in the WAL buffers (large, and
# the WAL writer asleep) and its heap pages in shared buffers.  After the
# crash PostgreSQL finds no WAL past the checkpoint and runs no redo; the
# entries must still be flagged, so that VACUUM removes them.
{
	my $node = $nodes{minimal};
	$node->safe_psql('postgres',
		'CREATE TABLE lost (k int8); CREATE INDEX lost_k ON lost USING pmhash (k) WITH (shards = 1)');
	$node->safe_psql('postgres', 'CHECKPOINT');
	my $offset = log_offset($node);
	my $bg = $node->background_psql('postgres');
	$bg->query_safe('BEGIN');
	$bg->query_safe('INSERT INTO lost SELECT g FROM generate_series(1, 3000) g');
	my $entries = $node->safe_psql('postgres', q{SELECT entries FROM pmhash_stats('lost_k')});
	note "lost_k holds $entries entries of the open transaction";
	my $what = os_crash_counted($node);
	note "open transaction: $what";
	eval { $bg->quit; };
	# 17 and later log an online checkpoint's redo point as a record of its
	# own, which recovery then replays: no redo is left for 15 and 16
	if ($node->safe_psql('postgres', 'SHOW server_version_num') < 170000)
	{
		like(slurp_file($node->logfile, $offset), qr/redo is not required/,
			'open transaction: PostgreSQL ran no redo after the crash');
	}
	else
	{
		like(slurp_file($node->logfile, $offset), qr/redo starts at/,
			'open transaction: PostgreSQL replayed only the checkpoint\'s redo record');
	}
	$node->safe_psql('postgres', "$VACUUM lost");
	is($node->safe_psql('postgres', q{SELECT pmhash_verify('lost_k') || ' ' || count(*) FROM lost}),
		'0 0', 'open transaction: VACUUM removed every entry of the rows the crash lost');
	check_log($node, $offset, 'open transaction');
}

$_->stop for values %nodes;
done_testing();
