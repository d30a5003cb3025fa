# Crashes inside a shard split, and inside a shard rebuild, at each of
# their persistence steps.
#
# An index made on an empty table grows just past 2,048 entries per shard,
# so that the next inserts split shards.  A session sets
# pmhash.split_pause_step = N and inserts: its first split pauses after its
# N-th persistence step (each flush and fence or msync of the split, then
# its SPLIT record, the last), holding its locks, and says so in the log.
# The test then kills that backend with SIGKILL (the postmaster restarts
# the cluster through crash recovery), or stops the server with an
# immediate shutdown and starts it again, or, on the msync path, simulates
# an operating system crash there (PmhashOsCrash: the index file keeps
# only what pmhash synced, and some pages written back), for N = 1, 2, ...
# until a split no longer pauses (every step was crashed at).  After each
# crash the index scans find what a seqscan finds for a sample of keys and
# pmhash_verify passes.  The same with pmhash.rebuild_pause_step = N, at
# each step of a shard's rebuild (its new segment, its descriptor), and at
# the split that ends a level, which also moves the descriptor array.  At
# the end, after a VACUUM, results are exact on the primary and on a
# streaming standby that replayed it all, with as many shards.  On the
# msync path and on the persistent-memory path.  The OS crashes fail when
# a split or a rebuild leaves its steps to the syncer (wrong answers,
# damaged segments, a descriptor past the end of the file).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashGrowth;
use PmhashOsCrash;
use PmhashRecovery;
use File::Path qw(rmtree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $os_lost = 0;    # pages whose unsynced content the simulated OS crashes took away

# Load $rows rows (enough for a split or a rebuild) in a session whose
# splits (or, with $setting 'pmhash.rebuild_pause_step', rebuilds) pause
# after persistence step $step, and crash the node there the way $how
# says: 'kill' (SIGKILL of the paused backend; the postmaster restarts the
# cluster through crash recovery), 'immediate' (an immediate shutdown,
# then a start) or 'os' (a simulated operating system crash, keeping the
# share $writeback of the unsynced pages, if given).  Returns whether the
# split paused, i.e. has that step.
sub crash_at_step
{
	my ($node, $how, $name, $rows, $step, $setting, $writeback) = @_;
	$setting //= 'pmhash.split_pause_step';
	$node->safe_psql('postgres', 'CHECKPOINT');    # short recoveries
	my $offset = log_offset($node);
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	my $backend = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_until(qr/started/,
		"SET $setting = $step;\n\\echo started\n" . load_sql($rows) . ";\n");
	my $pid;
	ok( wait_until(
			60,
			sub {
				($pid) = slurp_file($node->logfile, $offset) =~
				  /process ($backend) paused after persistence step $step\b/;
				return 1 if defined $pid;
				# the load ended without pausing: its splits have fewer steps
				return $node->safe_psql('postgres',
					"SELECT state = 'idle' AND query LIKE 'INSERT INTO g%' FROM pg_stat_activity "
					  . "WHERE pid = $backend") eq 't';
			}),
		"$name: the load paused at step $step or ended");
	if (!defined $pid)
	{
		$bg->quit;
		return 0;
	}
	if ($how eq 'kill')
	{
		$offset = log_offset($node);
		kill 'KILL', $pid;
		wait_until(120,
			sub { slurp_file($node->logfile, $offset) =~ /ready to accept connections/ })
		  or die "$name: the server did not come back after the kill at step $step";
	}
	elsif ($how eq 'os')
	{
		my ($what, $lost) = os_crash($node, 'immediate', undef, $writeback);
		note "$name: at step $step, $what";
		$os_lost += $lost;
	}
	else
	{
		$node->stop('immediate');
		start_node($node);
	}
	eval { $bg->quit };
	check_g($node, "$name: after a crash at step $step");
	return 1;
}

# The whole sequence on one path: 'msync' or 'pmem' (PMEM_IS_PMEM_FORCE=1).
sub run_path
{
	my ($path) = @_;
	# OS crashes on the msync path only: persistent memory on /dev/shm does not survive one
	my @hows = ('kill', 'immediate', $path eq 'msync' ? ('os') : ());
	my ($primary, $standby) = growth_pair($path, $path eq 'msync' ? "pmhash.os_crash_shadows = on\n" : '');
	my $log_start = log_offset($primary);
	my $standby_log = log_offset($standby);

	# a rebuild of a shard whose segment is full, while the shards are
	# below the split target and grow by rebuilds; a load that rebuilt
	# nothing (the last one rebuilt the shards near full) is tried again.
	# A rebuild's OS crashes keep most unsynced pages, three times a step:
	# its descriptor, kept, then points to a segment with pages lost (or
	# past the end of the file) unless the segment was durable first
	load($primary, 300_000);
	my %rebuild_steps;
	for my $how (@hows)
	{
		my $repeat = $how eq 'os' ? 3 : 1;
		my ($step, $paused, $tries) = (1, 0, 0);
		while ($step <= 30)
		{
			if (crash_at_step($primary, $how, "$path, rebuild, $how", 150_000, $step,
					'pmhash.rebuild_pause_step', 0.8))
			{
				($step, $paused) = ($step + 1, 0) if ++$paused == $repeat;
				next;
			}
			last if $step > 1 || ++$tries == 5;
		}
		$rebuild_steps{$how} = $step - 1;
	}
	is($rebuild_steps{$_}, 2, "$path: a rebuild has two steps (its segment, its descriptor), crashed by $_")
	  for @hows;

	# an ordinary split: 512 shards * 2,048 entries, then a little more
	load($primary, 1_060_000 - $primary->safe_psql('postgres', 'SELECT count(*) FROM g'));
	cmp_ok(shards($primary), '>', 512, "$path: the load split shards");
	is(scalar(() = glob(pmhash_dir($primary) . '/*.pmh.shadow')), 1, "$path: the index file has a shadow")
	  if $path eq 'msync';
	my %steps;
	for my $how (@hows)
	{
		my $step = 1;
		$step++ while $step <= 30 && crash_at_step($primary, $how, "$path, $how", 20_000, $step);
		$steps{$how} = $step - 1;
	}
	cmp_ok($steps{kill}, '>=', 5,
		"$path: a split has at least five steps (two halves, two descriptors, the map; $steps{kill})");
	is($steps{$_}, $steps{kill}, "$path: crashes by $_ met as many steps as by kill")
	  for grep { $_ ne 'kill' } @hows;

	$primary->safe_psql('postgres', $VACUUM . ' g');
	check_g($primary, "$path: primary after VACUUM", 1);
	$primary->wait_for_catchup($standby);
	is(shards($standby), shards($primary), "$path: the standby has as many shards as the primary");
	check_g($standby, "$path: standby", 1);
	check_log($standby, $standby_log, "$path: standby");
	$standby->stop;

	# the split that ends level 9 (slot 511 splits into 1023 and the
	# descriptor array moves): grow to 1,023 shards; a copy of the data directory there is the start of a crash
	# at each step of that split
	load($primary, 1_900_000 - $primary->safe_psql('postgres', 'SELECT count(*) FROM g'));
	grow_to_shards($primary, 1023);
	is(shards($primary), '1023', "$path: the index has 1,023 shards, one split before the level ends");
	$primary->stop;
	my $saved = PostgreSQL::Test::Utils::tempdir();
	system_or_bail('cp', '-a', $primary->data_dir, "$saved/data");
	for my $how (grep { $_ ne 'immediate' } @hows)
	{
		my $step = 1;
		while ($step <= 30)
		{
			rmtree($primary->data_dir);
			system_or_bail('cp', '-a', "$saved/data", $primary->data_dir);
			start_node($primary);
			my $paused = crash_at_step($primary, $how, "$path, level end, $how", 20_000, $step);
			$primary->stop;
			last unless $paused;
			$step++;
		}
		cmp_ok($step - 1, '>', $steps{kill},
			"$path: the split that ends the level has more steps (" . ($step - 1) . ") than another ($how)");
	}
	start_node($primary);
	cmp_ok(shards($primary), '>=', 1024, "$path: the level ended");
	$primary->safe_psql('postgres', $VACUUM . ' g');
	check_g($primary, "$path: primary after the level's end and VACUUM", 1);
	check_log($primary, $log_start, "$path: primary", qr/terminated by signal 9/);
	$primary->stop;
	return;
}

run_path($_) for qw(msync pmem);
cmp_ok($os_lost, '>', 0, "msync: the simulated OS crashes took away $os_lost unsynced pages");
done_testing();
