# Crash recovery of pmhash indexes under concurrent load.
#
# Two nodes: "pmem" keeps its index files on /dev/shm with
# PMEM_IS_PMEM_FORCE=1 (flush-and-fence path, wal_level minimal), "msync"
# keeps them in its data directory with PMEM_IS_PMEM_FORCE=0 (msync path,
# wal_level replica).  Their indexes start with 2 or 4 shards on a small
# table that the workload grows a lot.  Crash cycles alternate between the
# nodes and cycle through three kinds of crash, each at a random moment of
# a pgbench workload of inserts (with a heavy duplicate key, so that posting
# chains form), deletes, updates, probes, VACUUM and CHECKPOINT: kill -9 of
# one backend running the workload (the postmaster restarts everything),
# kill -9 of the postmaster (then start once its children are gone), and an
# immediate shutdown.  After each restart, for every key, the index scan and
# the bitmap scan must find exactly the rows a seqscan finds, none twice and
# without error, and pmhash_verify must pass; then after a VACUUM the same
# holds and pmhash_verify counts exactly the non-null keys.  Then crashes
# right after CREATE INDEX, and right after REINDEX and DROP INDEX with an
# uncommitted CREATE INDEX open: the indexes are right, the files of the
# dropped and replaced indexes are gone, the file of the uncommitted one is
# removed by the file cleaner (which sweeps at startup and every minute),
# and the directory holds exactly the files of the live indexes.
# The server logs must show no assertion failure, PANIC, ERROR or process
# killed by a signal other than the backends the test killed.
# PMHASH_TEST_SEED sets the seed of the random crash moments.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $seed = $ENV{PMHASH_TEST_SEED} // time;
srand $seed;
note "random seed $seed (set PMHASH_TEST_SEED to repeat)";

my $CYCLES = 8;
my @KINDS = qw(backend postmaster immediate);
my %killed_pids;    # node name => pids of backends the test killed
my $flagged = 0;    # recoveries that flagged unverified entries

# A backend of the workload, preferably one running a statement.
sub workload_backend
{
	my ($node) = @_;
	for my $try (1 .. 40)
	{
		my $pid = $node->safe_psql('postgres',
			    "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' "
			  . ($try < 40 ? "AND state = 'active' " : '')
			  . 'ORDER BY random() LIMIT 1');
		return $pid if $pid;
		Time::HiRes::sleep(0.05);
	}
	die 'no pgbench backend found';
}

# Crash a node in one of three ways and bring it up again; returns a
# description of what was done.
sub crash
{
	my ($node, $kind) = @_;
	if ($kind eq 'backend')
	{
		my $pid = workload_backend($node);
		my $offset = log_offset($node);
		push @{ $killed_pids{ $node->name } }, $pid;
		kill 'KILL', $pid;
		$node->wait_for_log(
			qr/all server processes terminated; reinitializing.*database system is ready to accept connections/s,
			$offset);
		return "kill -9 of backend $pid";
	}
	if ($kind eq 'postmaster')
	{
		my $postmaster = postmaster_pid($node);
		my @children = children_of($postmaster);
		$node->kill9;
		# the lock file stays taken until the postmaster is reaped, not just dead
		ok(wait_until(60, sub { !kill(0, $postmaster) && !grep { running($_) } @children }),
			'the killed postmaster and its children are gone');
		start_node($node);
		return "kill -9 of the postmaster and its " . scalar(@children) . ' children gone';
	}
	$node->stop('immediate');
	start_node($node);
	return 'immediate shutdown';
}

# Check that a node crashed and recovered since $offset, and note whether
# recovery flagged unverified entries.
sub check_recovered
{
	my ($node, $offset, $name) = @_;
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/database system was (?:interrupted|not properly shut down)|automatic recovery in progress/,
		"$name: the node went through crash recovery");
	my @lines = $log =~ /(pmhash: \d+ entries of "[^"]*" changed after the redo point[^\n]*)/g;
	note $_ for @lines;
	$flagged++ if @lines;
	return;
}

# Pattern of the log lines a crash cycle may show: the backends we killed.
sub allowed_kills
{
	my ($node) = @_;
	my @pids = @{ $killed_pids{ $node->name } // [] };
	return @pids ? qr/(?:server process|client backend) \(PID (?:${\join('|', @pids)})\) was terminated by signal 9/
	  : undef;
}

# SQL giving the file name of an index.
sub file_sql
{
	my ($index) = @_;
	return "SELECT d.oid || '_' || pg_relation_filenode('$index') || '.pmh' "
	  . 'FROM pg_database d WHERE datname = current_database()';
}

# The file name of an index.
sub file_of
{
	my ($node, $index) = @_;
	return $node->safe_psql('postgres', file_sql($index));
}

# Shards and buckets of an index.
sub size_of
{
	my ($node, $index) = @_;
	return $node->safe_psql('postgres',
		"SELECT shards || ' shards, ' || buckets || ' buckets, ' || chains || ' chains' "
		  . "FROM pmhash_stats('$index')");
}

############################################################################
# Two nodes, one for each persistence path; the pmem one with data
# checksums, so that its index files keep bucket checksums, which a crash
# in the middle of a change must not turn into reports of damage.
############################################################################

my %nodes = (
	pmem => new_node('pmem', dir => 'shm', force => 1, init => { extra => ['--data-checksums'] }),
	msync => new_node('msync', dir => 'data', force => 0, init => { allows_streaming => 1 }));
my %start_size;
for my $path (sort keys %nodes)
{
	my $node = $nodes{$path};
	start_workload_node($node, $path eq 'pmem');
	$start_size{$path} = { map { $_->[0] => size_of($node, $_->[0]) } @RT_INDEXES };
	check_indexes($node, 'postgres', "$path: fresh indexes", @RT_INDEXES);
}

############################################################################
# Crash cycles under load.
############################################################################

for my $cycle (1 .. $CYCLES)
{
	my $path = (sort keys %nodes)[ ($cycle - 1) % 2 ];
	my $node = $nodes{$path};
	my $kind = $KINDS[ ($cycle - 1) % 3 ];
	my $name = "cycle $cycle ($path, $kind)";
	my $offset = log_offset($node);
	my $load = start_crash_load($node);
	my $delay = 3 + rand(3);
	Time::HiRes::sleep($delay);
	my $what = crash($node, $kind);
	note sprintf '%s: %s after %.1f s of load', $name, $what, $delay;
	finish_crash_load($node, $name, $load);
	check_recovered($node, $offset, $name);
	check_node($node, $name, 1);
	check_log($node, $offset, $name, allowed_kills($node));
}
ok($flagged > 0, "recovery flagged unverified entries in $flagged of $CYCLES cycles");

for my $path (sort keys %nodes)
{
	my $node = $nodes{$path};
	for my $spec (@RT_INDEXES)
	{
		my $index = $spec->[0];
		my $now = size_of($node, $index);
		note "$path: $index: $start_size{$path}{$index} at the start, $now now";
		my ($buckets_then) = $start_size{$path}{$index} =~ /(\d+) buckets/;
		my ($buckets_now) = $now =~ /(\d+) buckets/;
		cmp_ok($buckets_now, '>', 4 * $buckets_then, "$path: $index grew a lot");
	}
	like(size_of($node, 'rt_k'), qr/ [1-9]\d* chains/, "$path: rt_k has posting chains");
	note "$path: rt has " . $node->safe_psql('postgres', 'SELECT count(*) FROM rt') . ' rows';
}

############################################################################
# Crashes right after DDL.
############################################################################

my @N_INDEX = ([ 'rt_n', 'rt', 'n', '-g' ]);
for my $path (sort keys %nodes)
{
	my $node = $nodes{$path};
	my $offset = log_offset($node);
	my ($first, $second) = $path eq 'pmem' ? qw(immediate postmaster) : qw(postmaster immediate);

	# CREATE INDEX, then a crash
	$node->safe_psql('postgres', 'CREATE INDEX rt_n ON rt USING pmhash (n) WITH (shards = 2)');
	crash($node, $first);
	check_indexes($node, 'postgres', "$path: crash after CREATE INDEX", @N_INDEX);
	check_verify($node, 'postgres', "$path: crash after CREATE INDEX", 1, @N_INDEX);

	# REINDEX and DROP INDEX committed, a CREATE INDEX open, then a crash
	my @gone = (file_of($node, 'rt_t'), file_of($node, 'rt_n'));
	$node->safe_psql('postgres', 'REINDEX INDEX rt_t; DROP INDEX rt_n;');
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN; CREATE INDEX rt_open ON rt USING pmhash (k)');
	my $open_file = $s->query_safe(file_sql('rt_open'));
	ok(-e pmhash_dir($node) . "/$open_file", "$path: the open CREATE INDEX has its file $open_file");
	crash($node, $second);
	eval { $s->quit; };
	my $name = "$path: $second crash after REINDEX, DROP INDEX and with a CREATE INDEX open";
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM pg_class WHERE relname IN ('rt_n', 'rt_open')"),
		'0', "$name: the dropped and the uncommitted index do not exist");
	check_indexes($node, 'postgres', $name, @RT_INDEXES);
	check_verify($node, 'postgres', $name, 1, @RT_INDEXES);
	ok(!-e pmhash_dir($node) . "/$_", "$name: $_ of the dropped or replaced index is gone")
	  for @gone;
	ok(wait_until(70, sub { !-e pmhash_dir($node) . "/$open_file" }),
		"$name: $open_file of the uncommitted CREATE INDEX is removed within 70 s");
	is(join(' ', pmh_files($node)), join(' ', live_files($node, 'postgres')),
		"$name: the directory holds exactly the files of the live indexes");
	check_log($node, $offset, "$path: crashes after DDL");
}

for my $path (sort keys %nodes)
{
	my $node = $nodes{$path};
	$node->stop;
	check_log($node, 0, "$path: whole run", allowed_kills($node));
}

done_testing();
