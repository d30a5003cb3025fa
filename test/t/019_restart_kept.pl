# A crash of PostgreSQL alone loses nothing that pmhash stored in a mapped
# file: the page cache (or the CPU cache on DAX) keeps it.  Only an
# operating system crash can lose replayed changes that were not synced.
#
# 1. Hot standbys (one per persistence path) replay a primary's inserts,
#    deletes and VACUUM, then a restartpoint, so that their index files
#    hold replayed changes not yet synced from before its redo point.  A kill -9 of a
#    standby backend (the postmaster reinitializes) and an immediate
#    shutdown and start must leave every pmhash index usable on the standby:
#    index and bitmap scans of every key agree with a seqscan (as for a
#    hash index on a twin table that goes through the same changes),
#    nothing is marked to be rebuilt, and replay goes on.  An operating system crash
#    of a standby, simulated by blanking the boot recorded in the headers
#    of the files that hold unsynced replayed changes, still marks them to
#    be rebuilt (55000 on the standby), and after promotion the first use
#    rebuilds them and answers right.
# 2. With pmhash.max_indexes = 4 and 8 indexes, crash recovery evicts
#    shares of files it changed; after each of two immediate shutdowns
#    every file's header must say that it holds no unsynced replayed change,
#    and a simulated operating system crash after them rebuilds nothing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles qw(compare_with_seqscan run_sql read_bytes write_bytes);
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $STATE_OFFSET = 72;         # PmhFileHeader.state
my $REDO_DIRTY = 2;            # PMH_STATE_REDO_DIRTY
my $BOOT_OFFSET = 96;          # PmhFileHeader.redo_boot
my $LOST = qr/may have lost replayed changes in an operating system crash/;

# The .pmh files of a node whose header says they hold unsynced replayed
# changes; with $before, only those whose last sync precedes that LSN.
sub redo_dirty_files
{
	my ($node, $before) = @_;
	my @dirty;
	for my $name (pmh_files($node))
	{
		my $header = read_bytes(pmhash_dir($node) . "/$name", 0, 128);
		my ($state, $synced) = unpack('Q<Q<', substr($header, $STATE_OFFSET, 16));
		push @dirty, $name
		  if ($state & $REDO_DIRTY) && (!defined $before || $synced < $before);
	}
	return @dirty;
}

# A node's last checkpoint or restartpoint redo LSN, as a number.
sub redo_point
{
	my ($node) = @_;
	my ($hi, $lo) = split m{/},
	  $node->safe_psql('postgres', 'SELECT redo_lsn FROM pg_control_checkpoint()');
	return hex($hi) * 2**32 + hex($lo);
}

# Simulate what an operating system crash changes for pmhash on a stopped
# node: the boot recorded in every header is not the current one.
sub new_boot
{
	my ($node) = @_;
	for my $name (pmh_files($node))
	{
		write_bytes(pmhash_dir($node) . "/$name", $BOOT_OFFSET, "\xff" x 16);
	}
	return;
}

# Changes on the primary that the standbys replay: inserts, deletes, VACUUM.
sub primary_changes
{
	my ($primary, $from) = @_;
	$primary->safe_psql('postgres',
		"INSERT INTO t SELECT i, i % 97 FROM generate_series($from, $from + 1999) i; "
		  . "DELETE FROM t WHERE id % 7 = 0 AND id >= $from; $VACUUM t; "
		  . "INSERT INTO th SELECT i, i % 97 FROM generate_series($from, $from + 1999) i; "
		  . "DELETE FROM th WHERE id % 7 = 0 AND id >= $from; $VACUUM th");
	return;
}

# Check every key of t's indexes on a node against a seqscan, and of th's
# hash index, which goes through the same steps: where it answers, pmhash
# must too.
sub check_t
{
	my ($node, $name) = @_;
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -1, 98, "$name, k");
	compare_with_seqscan($node, 'postgres', 't_id', 't', 'id', 0, 300, "$name, id");
	compare_with_seqscan($node, 'postgres', 'th_k', 'th', 'k', -1, 98, "$name, hash k");
	return;
}

############################################################################
# 1. Standbys restarted by a crash of PostgreSQL alone.
############################################################################

my $primary = new_node('primary', dir => 'data', force => 0, init => { allows_streaming => 1 });
start_node($primary);
$primary->backup('base');
my @standbys = (
	new_node_from_backup('standby_pmem', $primary, 'base', dir => 'shm', force => 1,
		restore => { has_streaming => 1 }),
	new_node_from_backup('standby_msync', $primary, 'base', dir => 'data', force => 0,
		restore => { has_streaming => 1 }));
start_node($_) for @standbys;
# created after the backup: the standbys make their files from the WAL
$primary->safe_psql('postgres',
	    'CREATE EXTENSION pmhash; CREATE TABLE t (id int, k int); '
	  . 'CREATE INDEX t_k ON t USING pmhash (k); '
	  . 'CREATE UNIQUE INDEX t_id ON t USING pmhash (id); '
	  . 'CREATE TABLE th (id int, k int); CREATE INDEX th_k ON th USING hash (k)');

my $next = 1;
# replayed changes, the last few of them after replay's last sync (it syncs
# every 1,024 records), then a restartpoint: the files hold unsynced
# replayed changes from before its redo point
sub changes_before_restartpoint
{
	primary_changes($primary, $next);
	$next += 2000;
	$primary->safe_psql('postgres', "INSERT INTO t VALUES ($next, 1); CHECKPOINT");
	$next++;
	$primary->wait_for_catchup($_, 'replay', $primary->lsn('insert')) for @standbys;
	$_->safe_psql('postgres', 'CHECKPOINT') for @standbys;
	return;
}

for my $standby (@standbys)
{
	my $mode = $standby->name;
	changes_before_restartpoint();
	ok(scalar(redo_dirty_files($standby, redo_point($standby))) > 0,
		"$mode: the files hold replayed changes not synced before the restartpoint");
	check_t($standby, "$mode before the crashes");

	# kill -9 of a backend: the postmaster reinitializes
	my $offset = log_offset($standby);
	my $session = $standby->background_psql('postgres');
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	kill 'KILL', $pid;
	$standby->wait_for_log(
		qr/all server processes terminated; reinitializing.*database system is ready to accept read-only connections/s,
		$offset);
	eval { $session->quit };
	check_t($standby, "$mode after kill -9 of a backend");
	unlike(slurp_file($standby->logfile, $offset), $LOST,
		"$mode after kill -9 of a backend: nothing is taken for lost");

	# an immediate shutdown and a start
	changes_before_restartpoint();
	ok(scalar(redo_dirty_files($standby, redo_point($standby))) > 0,
		"$mode: the files hold replayed changes not synced before the restartpoint, again");
	$offset = log_offset($standby);
	$standby->stop('immediate');
	start_node($standby);
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	check_t($standby, "$mode after an immediate shutdown");
	unlike(slurp_file($standby->logfile, $offset), $LOST,
		"$mode after an immediate shutdown: nothing is taken for lost");

	# replay goes on
	primary_changes($primary, $next);
	$next += 2000;
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	check_t($standby, "$mode, replay after the crashes");
	check_log($standby, 0, "$mode after the crashes", qr/was terminated by signal 9: Killed/);
}

# an operating system crash of a standby: what replay had not synced may be lost
{
	my $standby = $standbys[1];
	changes_before_restartpoint();
	ok(scalar(redo_dirty_files($standby, redo_point($standby))) > 0,
		'simulated OS crash: the files hold replayed changes not synced before the restartpoint');
	my $offset = log_offset($standby);
	$standby->stop('immediate');
	new_boot($standby);
	start_node($standby);
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	like(slurp_file($standby->logfile, $offset), $LOST,
		'simulated OS crash: the files with unsynced replayed changes are taken for lost');
	my ($rc, $out, $err) = run_sql($standby, 'postgres',
		'SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM t WHERE k = 5');
	like($err, qr/55000: pmhash index "t_(k|id)" must be rebuilt from its table, which cannot happen here/,
		'simulated OS crash: the standby refuses the index');
	$standby->promote;
	check_t($standby, 'simulated OS crash, promoted');
	like(slurp_file($standby->logfile, $offset), qr/rebuil/,
		'simulated OS crash, promoted: the first use rebuilt the index');
	$standby->stop;
}
$standbys[0]->stop;
$primary->stop;

############################################################################
# 2. Crash recovery that evicts shares of the files it changes.
############################################################################

{
	my $node = new_node('small', dir => 'data', force => 0,
		conf => "pmhash.max_indexes = 4\n");
	start_node($node);
	$node->safe_psql('postgres', 'CREATE EXTENSION pmhash');
	for my $i (1 .. 8)
	{
		$node->safe_psql('postgres',
			    "CREATE TABLE s$i (id int, k int); "
			  . "CREATE INDEX s${i}_k ON s$i USING pmhash (k)");
	}
	for my $crash (1 .. 2)
	{
		$node->safe_psql('postgres', 'CHECKPOINT');
		for my $round (1 .. 3)
		{
			$node->safe_psql('postgres', join(' ', map {
				"INSERT INTO s$_ SELECT i, i % 31 FROM generate_series(1, 300) i;"
			} 1 .. 8));
		}
		my $offset = log_offset($node);
		$node->stop('immediate');
		start_node($node);
		like(slurp_file($node->logfile, $offset), qr/redo starts at/,
			"max_indexes 4, crash $crash: crash recovery replayed");
		$node->stop('immediate');
		is_deeply([ redo_dirty_files($node) ], [],
			"max_indexes 4, crash $crash: no file is left with unsynced replayed changes");
		new_boot($node);
		$offset = log_offset($node);
		start_node($node);
		unlike(slurp_file($node->logfile, $offset), qr/will be rebuilt/,
			"max_indexes 4, crash $crash and an OS crash: nothing is rebuilt");
		for my $i (1 .. 8)
		{
			compare_with_seqscan($node, 'postgres', "s${i}_k", "s$i", 'k', -1, 31,
				"max_indexes 4, crash $crash, s$i");
		}
	}
	$node->stop;
}

done_testing();
