# Shared helpers of the pmhash recovery tests (002_crash, 003_standby,
# 004_pitr): nodes with pmhash preloaded, the workload table and its pgbench
# scripts, the check that every key's index scan and bitmap scan find what a
# seqscan finds, pmhash_verify, and scanning the server log for crashes.
package PmhashRecovery;

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(
  new_node new_node_from_backup pmhash_dir start_node
  create_workload_table start_workload_node workload_scripts start_pgbench finish_pgbench
  start_crash_load finish_crash_load check_indexes check_verify check_node check_log log_offset wait_until pmh_files
  live_files children_of running postmaster_pid @RT_INDEXES $VACUUM
);
our @EXPORT_OK = qw(scan_sql);

# The indexes of the workload table: [index, table, column, absent key of g].
our @RT_INDEXES = (
	[ 'rt_id', 'rt', 'id', '-g' ],
	[ 'rt_k', 'rt', 'k', '-g' ],
	[ 'rt_t', 'rt', 't', "'absent' || g" ]);

# VACUUM that removes the entries of every dead row: by default VACUUM skips
# the indexes when under 2% of the table's pages have dead line pointers,
# and a page another process has pinned (the background writer writing it
# out) keeps its dead rows and their entries unless the VACUUM is
# aggressive, which waits for the page; pmhash_verify counts what is left.
our $VACUUM = 'VACUUM (FREEZE, INDEX_CLEANUP ON)';

my %dir_of;      # node name => absolute pmhash.directory
my %force_of;    # node name => PMEM_IS_PMEM_FORCE of its server

# Settings of every node: pmhash preloaded, postmaster restarts after a
# backend crash, no autovacuum (the tests VACUUM themselves), small logs,
# no JIT (plans forced with enable_* look so costly that LLVM would spend
# minutes compiling them), a syncer round every second (not 30), which
# the tests that wait for one expect.
my $BASE_CONF = <<'EOC';
shared_preload_libraries = 'pmhash'
pmhash.sync_interval = 1s
jit = off
restart_after_crash = on
autovacuum = off
log_statement = ddl
max_connections = 40
EOC

# Point a node's pmhash.directory at a fresh directory of its own on
# /dev/shm ('shm'), at 'pmhash' inside its data directory ('data'), or at a
# given absolute path; 'default' leaves the setting out of postgresql.conf
# (the default is that same directory inside the data directory).
sub set_directory
{
	my ($node, $where) = @_;
	my $name = $node->name;
	if ($where =~ m{^/})
	{
		$node->append_conf('postgresql.conf', "pmhash.directory = '$where'");
		$dir_of{$name} = $where;
	}
	elsif ($where eq 'default')
	{
		$dir_of{$name} = $node->data_dir . '/pmhash';
	}
	elsif ($where eq 'shm')
	{
		my $dir = File::Temp::tempdir("pmhash_${name}_XXXX", DIR => '/dev/shm', CLEANUP => 1);
		$node->append_conf('postgresql.conf', "pmhash.directory = '$dir'");
		$dir_of{$name} = $dir;
	}
	else
	{
		$node->append_conf('postgresql.conf', "pmhash.directory = 'pmhash'");
		$dir_of{$name} = $node->data_dir . '/pmhash';
	}
	return $dir_of{$name};
}

# Absolute pmhash.directory of a node.
sub pmhash_dir
{
	my ($node) = @_;
	return $dir_of{ $node->name };
}

# Create (not start) a node with pmhash preloaded. dir => 'shm' | 'data' | 'default',
# force => PMEM_IS_PMEM_FORCE for its server (default 1), init => options of
# Cluster::init, conf => more postgresql.conf lines, preload => 0 leaves
# pmhash out of shared_preload_libraries, install_path => another
# PostgreSQL installation's directory (with pmhash installed) to run.
sub new_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		$opt{install_path} ? (install_path => $opt{install_path}) : ());
	my $conf = $BASE_CONF;
	$conf =~ s/^shared_preload_libraries = .*\n//m unless $opt{preload} // 1;
	$node->init(%{ $opt{init} // {} });
	$node->append_conf('postgresql.conf', $conf . ($opt{conf} // ''));
	set_directory($node, $opt{dir} // 'data');
	$force_of{$name} = $opt{force} // 1;
	return $node;
}

# Create (not start) a node from a base backup of $root; options as for
# new_node, plus the Cluster::init_from_backup parameters in restore.
sub new_node_from_backup
{
	my ($name, $root, $backup, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init_from_backup($root, $backup, %{ $opt{restore} // {} });
	$node->append_conf('postgresql.conf', $opt{conf}) if $opt{conf};
	set_directory($node, $opt{dir} // 'data');
	$force_of{$name} = $opt{force} // 1;
	return $node;
}

# Start a node's server with its PMEM_IS_PMEM_FORCE setting.
sub start_node
{
	my ($node) = @_;
	local $ENV{PMEM_IS_PMEM_FORCE} = $force_of{ $node->name } // 1;
	$node->start;
	return;
}

# Create table rt (id, k, t, n) with $rows rows and pmhash indexes on id (4
# shards), k (2 shards) and t (4 shards), plus the functions the workload
# uses: rt_key (0 is a heavy key of 5%, 3% NULL, dense 1..2000, sparse up to
# 100000), rt_t (text key of a number), rt_random_id, and pm_check (raises if
# index scan, bitmap scan and seqscan of one key differ in one snapshot).
sub create_workload_table
{
	my ($node, $db, $rows) = @_;
	$node->safe_psql($db, <<"EOS");
CREATE EXTENSION IF NOT EXISTS pmhash;
CREATE FUNCTION rt_key() RETURNS int8 LANGUAGE sql VOLATILE AS \$\$
	SELECT CASE WHEN r < 0.05 THEN 0
				WHEN r < 0.08 THEN NULL
				WHEN r < 0.50 THEN 1 + floor(random() * 2000)::int8
				ELSE 1 + floor(random() * 100000)::int8 END
	FROM (SELECT random() AS r) s
\$\$;
CREATE FUNCTION rt_t(n int8) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS \$\$
	SELECT 'v' || n || repeat('-', (n % 37)::int)
\$\$;
CREATE TABLE rt (id bigserial, k int8, t text, n int NOT NULL DEFAULT 0)
	WITH (fillfactor = 80, autovacuum_enabled = false);
CREATE FUNCTION rt_random_id() RETURNS int8 LANGUAGE sql VOLATILE AS \$\$
	SELECT 1 + floor(random() * last_value)::int8 FROM rt_id_seq
\$\$;
CREATE FUNCTION pm_check(tab text, col text, v text) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
	q text := format('SELECT array_agg(id ORDER BY id) FROM %I WHERE %I = %L', tab, col, v);
	by_index int8[];
	by_bitmap int8[];
	by_seq int8[];
BEGIN
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	PERFORM set_config('enable_indexscan', 'on', true);
	EXECUTE q INTO by_index;
	PERFORM set_config('enable_indexscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'on', true);
	EXECUTE q INTO by_bitmap;
	PERFORM set_config('enable_bitmapscan', 'off', true);
	PERFORM set_config('enable_seqscan', 'on', true);
	EXECUTE q INTO by_seq;
	IF by_index IS DISTINCT FROM by_seq OR by_bitmap IS DISTINCT FROM by_seq THEN
		RAISE EXCEPTION 'pm_check: %.% = % differs: index scan %, bitmap scan %, seqscan %',
			tab, col, v, by_index, by_bitmap, by_seq;
	END IF;
END \$\$;
INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, $rows);
CREATE INDEX rt_id ON rt USING pmhash (id) WITH (shards = 4);
CREATE INDEX rt_k ON rt USING pmhash (k) WITH (shards = 2);
CREATE INDEX rt_t ON rt USING pmhash (t) WITH (shards = 4);
ANALYZE rt;
EOS
	return;
}

# Start a node, create the workload table rt with 1000 rows, and check
# that its three index files take the pmem path (if $pmem) or the msync one.
sub start_workload_node
{
	my ($node, $pmem) = @_;
	my $path = $pmem ? 'pmem' : 'msync';
	start_node($node);
	create_workload_table($node, 'postgres', 1000);
	is($node->safe_psql('postgres', 'SELECT string_agg(DISTINCT s.is_pmem::text, \',\') FROM '
		  . "unnest(ARRAY['rt_id', 'rt_k', 'rt_t']) i, pmhash_stats(i::regclass) s"),
		$pmem ? 'true' : 'false', $node->name . ": the index files take the $path path");
	return;
}

# Write the pgbench scripts of the workload into a new directory; returns
# name => path.  insert: batches of 20 rows (growth, heavy key); delete and
# update: single rows found by id or through the k and t indexes; probe:
# index and bitmap scans; maint (one client): VACUUM, sometimes a
# CHECKPOINT; standby: same-snapshot comparisons of the three scan kinds on
# rt and on the table side that 003_standby creates.
sub workload_scripts
{
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my %scripts = (
		insert => "INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, 20);\n",
		delete => <<'EOS',
\set k random(1, 2000)
DELETE FROM rt WHERE id = (SELECT rt_random_id());
DELETE FROM rt WHERE id = (SELECT id FROM rt WHERE k = :k LIMIT 1);
EOS
		update => <<'EOS',
\set k random(1, 100000)
UPDATE rt SET k = rt_key() WHERE id = (SELECT rt_random_id());
UPDATE rt SET t = rt_t(rt_key()), n = n + 1 WHERE id = (SELECT rt_random_id());
UPDATE rt SET n = n + 1 WHERE id = (SELECT rt_random_id());
UPDATE rt SET k = rt_key() WHERE id = (SELECT id FROM rt WHERE t = rt_t(:k) LIMIT 1);
EOS
		probe => <<'EOS',
\set h random(0, 9)
\set k random(1, 2000)
\set k case when :h = 0 then 0 else :k end
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT count(*), sum(id) FROM rt WHERE k = :k;
SELECT count(*), sum(id) FROM rt WHERE t = rt_t(:k);
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = on;
SELECT count(*), sum(id) FROM rt WHERE k = :k;
SELECT count(*), sum(id) FROM rt WHERE id = rt_random_id();
COMMIT;
EOS
		maint => <<'EOS',
\set c random(0, 3)
VACUUM rt;
\if :c = 0
CHECKPOINT;
\endif
\sleep 300 ms
EOS
		standby => <<'EOS',
\set h random(0, 9)
\set k random(1, 2000)
\set k case when :h = 0 then 0 else :k end
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pm_check('rt', 'k', :k::text);
SELECT pm_check('rt', 't', rt_t(:k));
SELECT pm_check('rt', 'id', rt_random_id()::text);
SELECT pm_check('side', 'k', (:k % 500)::text);
COMMIT;
EOS
	);
	my %path;
	for my $name (keys %scripts)
	{
		$path{$name} = "$dir/$name.sql";
		PostgreSQL::Test::Utils::append_to_file($path{$name}, $scripts{$name});
	}
	return \%path;
}

my $pgbench_runs = 0;

# Start pgbench in the background against a node: clients, seconds,
# scripts (list of "path@weight") and optionally rate (transactions per
# second in all, so that the amount of work does not depend on the speed of
# the machine); its sessions are named pgbench.  Returns a handle for
# finish_pgbench.
sub start_pgbench
{
	my ($node, $db, %opt) = @_;
	my $out = $node->basedir . '/pgbench_' . ++$pgbench_runs . '.log';
	my @cmd = (
		'pgbench', '-n', '-h', $node->host, '-p', $node->port,
		'-c', $opt{clients}, '-j', 1, '-T', $opt{seconds}, ($opt{rate} ? ('-R', $opt{rate}) : ()),
		(map { ('-f', $_) } @{ $opt{scripts} }), $db);
	local $ENV{PGAPPNAME} = 'pgbench';
	my $h = IPC::Run::start(\@cmd, '<', \undef, '>', $out, '2>&1',
		IPC::Run::timeout($opt{seconds} + 300));
	return { h => $h, out => $out };
}

# Wait for a pgbench started by start_pgbench; returns (exit code, output).
sub finish_pgbench
{
	my ($run) = @_;
	eval { $run->{h}->finish; };
	my $rc = $@ ? -1 : $run->{h}->result(0);
	diag "pgbench: $@" if $@;
	return ($rc, slurp_file($run->{out}));
}

my $crash_scripts;

# Start the load that crash tests interrupt: 4 clients of inserts, deletes,
# updates and probes (400 transactions a second in all) and one of VACUUM
# and CHECKPOINT.  Returns a handle for finish_crash_load.
sub start_crash_load
{
	my ($node) = @_;
	$crash_scripts //= workload_scripts();
	my @load = map { "$crash_scripts->{$_->[0]}\@$_->[1]" } [ insert => 5 ], [ delete => 2 ],
	  [ update => 2 ], [ probe => 1 ];
	my $ids_before = $node->safe_psql('postgres', 'SELECT last_value FROM rt_id_seq');
	return {
		ids_before => $ids_before,
		runs => [
			start_pgbench($node, 'postgres', clients => 4, seconds => 120, rate => 400,
				scripts => \@load),
			start_pgbench($node, 'postgres', clients => 1, seconds => 120,
				scripts => [ $crash_scripts->{maint} ]) ]
	};
}

# Wait for the load a crash interrupted: it must have seen no SQL error,
# and it must have inserted rows.
sub finish_crash_load
{
	my ($node, $name, $load) = @_;
	for my $run (@{ $load->{runs} })
	{
		my ($rc, $out) = finish_pgbench($run);
		unlike($out, qr/ERROR:/, "$name: the workload saw no SQL error before the crash")
		  or diag $out;
	}
	cmp_ok($node->safe_psql('postgres', 'SELECT last_value FROM rt_id_seq'),
		'>', $load->{ids_before}, "$name: the workload inserted rows");
	return;
}

# SQL comparing, for every key of an index's column (and some absent keys),
# the ids found by one kind of scan (index or bitmap) with those of a
# seqscan in the same query.  Returns (SET commands, query); the query gives
# keys, mismatching keys, keys with a row found twice, rows found, an md5 of
# the scan's per-key results, and a few mismatches.
sub scan_sql
{
	my ($spec, $kind) = @_;
	my ($index, $table, $col, $absent) = @$spec;
	my $sets = $kind eq 'index'
	  ? 'SET LOCAL enable_indexscan = on; SET LOCAL enable_bitmapscan = off;'
	  : 'SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = on;';
	my $query = <<"EOQ";
WITH s AS MATERIALIZED (
	SELECT $col AS v, array_agg(id::int8 ORDER BY id) AS ids FROM $table
	WHERE $col IS NOT NULL GROUP BY 1),
p AS (SELECT v, ids FROM s UNION ALL SELECT $absent, NULL::int8[] FROM generate_series(1, 20) g),
r AS MATERIALIZED (
	SELECT v, ids AS want,
		(SELECT array_agg(x.id::int8 ORDER BY x.id) FROM $table x WHERE x.$col = p.v) AS got
	FROM p)
SELECT count(*),
	count(*) FILTER (WHERE got IS DISTINCT FROM want),
	count(*) FILTER (WHERE cardinality(got) <> (SELECT count(DISTINCT u) FROM unnest(got) u)),
	coalesce(sum(cardinality(got)), 0),
	md5(coalesce(string_agg(v || ':' || got::text, ' ' ORDER BY v), '')),
	coalesce((SELECT string_agg(left(e.v || ': $kind scan ' || coalesce(e.got::text, '{}')
		|| ', seqscan ' || coalesce(e.want::text, '{}'), 300), '; ')
		FROM (SELECT * FROM r WHERE got IS DISTINCT FROM want ORDER BY v LIMIT 4) e), '')
FROM r
EOQ
	return ($sets, $query);
}

# For every index spec ([index, table, column, absent]), check in one
# REPEATABLE READ snapshot that the plans use the index, and that the index
# scan and the bitmap scan find for every key exactly the rows a seqscan
# finds, none twice, without error.  Returns index => md5 of its per-key
# results (only for indexes that passed), to compare nodes and moments.
sub check_indexes
{
	my ($node, $db, $name, @specs) = @_;
	my $sql = "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSET LOCAL enable_seqscan = off;\n";
	for my $spec (@specs)
	{
		for my $kind ('index', 'bitmap')
		{
			my ($sets, $query) = scan_sql($spec, $kind);
			$sql .= "\\echo ### $spec->[0] $kind\n$sets\nEXPLAIN (COSTS OFF) $query;\n$query;\n";
		}
	}
	$sql .= "COMMIT;\n";
	my ($rc, $out, $err) = $node->psql($db, $sql);
	my %digest;
	if (!is($rc, 0, "$name: the scans of every key run without error"))
	{
		diag $err;
		return \%digest;
	}
	my %result;
	for my $chunk (split /^### /m, $out)
	{
		next unless $chunk =~ /\S/;
		my ($head, @lines) = split /\n/, $chunk;
		$result{$head} = { plan => join("\n", @lines[ 0 .. $#lines - 1 ]), row => $lines[-1] };
	}
	for my $spec (@specs)
	{
		my ($index, $table) = @$spec;
		for my $kind ('index', 'bitmap')
		{
			my $r = $result{"$index $kind"};
			my $node_re = $kind eq 'index'
			  ? qr/Index Scan using \Q$index\E on \Q$table\E x/
			  : qr/Bitmap Index Scan on \Q$index\E/;
			ok($r && $r->{plan} =~ $node_re && $r->{plan} =~ /Seq Scan on \Q$table\E\b/,
				"$name: $index: the $kind scan query scans the index per key and the table once")
			  or diag($r ? $r->{plan} : 'no output');
			my ($keys, $mismatches, $dups, $found, $md5, $examples) =
			  split /\|/, $r ? $r->{row} : '', 6;
			$examples //= '';
			is($mismatches, '0',
				"$name: $index: $kind scans find what the seqscan finds for all "
				  . ($keys // '?') . " keys ($found rows)")
			  or diag "$index: $examples";
			is($dups, '0', "$name: $index: no row comes back twice from a $kind scan");
			$digest{$index} = $md5 if $kind eq 'index' && ($mismatches // '') eq '0';
		}
	}
	return \%digest;
}

# pmhash_verify must pass for each index; with exact => 1 it, and the
# entries of pmhash_stats, must equal the number of non-null keys (after a
# $VACUUM), else be at least that (entries of dead rows are still there).
sub check_verify
{
	my ($node, $db, $name, $exact, @specs) = @_;
	for my $spec (@specs)
	{
		my ($index, $table, $col) = @$spec;
		my ($rc, $out, $err) = $node->psql($db,
			"SELECT pmhash_verify('$index'), (SELECT entries FROM pmhash_stats('$index')), "
			  . "(SELECT count($col) FROM $table)");
		if (!is($rc, 0, "$name: pmhash_verify('$index') passes"))
		{
			diag $err;
			next;
		}
		my ($verified, $entries, $keys) = split /\|/, $out;
		if ($exact)
		{
			is("$verified $entries", "$keys $keys",
				"$name: $index: pmhash_verify and pmhash_stats count the $keys non-null keys");
		}
		else
		{
			cmp_ok($verified, '>=', $keys,
				"$name: $index: pmhash_verify counts at least the $keys non-null keys");
		}
	}
	return;
}

# Check every index of the workload table rt, before and after a VACUUM:
# scans of every key against a seqscan, pmhash_verify (counting exactly the
# non-null keys after it if $exact, else at least them: see check_verify).
sub check_node
{
	my ($node, $name, $exact) = @_;
	check_indexes($node, 'postgres', $name, @RT_INDEXES);
	check_verify($node, 'postgres', $name, 0, @RT_INDEXES);
	my ($rc, $out, $err) = $node->psql('postgres', "$VACUUM rt");
	is($rc, 0, "$name: VACUUM succeeds") or diag $err;
	check_indexes($node, 'postgres', "$name, after VACUUM", @RT_INDEXES);
	check_verify($node, 'postgres', "$name, after VACUUM", $exact, @RT_INDEXES);
	return;
}

# Current length of a node's server log.
sub log_offset
{
	my ($node) = @_;
	return -s $node->logfile // 0;
}

# Check the server log from $offset: no assertion failure, PANIC, ERROR or
# process killed by a signal, except lines matching $allow.  Returns the log.
sub check_log
{
	my ($node, $offset, $name, $allow) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @bad = grep { /TRAP:|PANIC:|ERROR:|terminated by signal|was terminated/ }
	  split /\n/, $log;
	@bad = grep { !/$allow/ } @bad if $allow;
	is(scalar(@bad), 0, "$name: no error or crash in the server log of " . $node->name)
	  or diag join("\n", @bad[ 0 .. ($#bad < 20 ? $#bad : 19) ]);
	return $log;
}

# Wait up to $secs seconds for $cond->() to hold; returns whether it does.
sub wait_until
{
	my ($secs, $cond) = @_;
	my $end = time + $secs;
	while (time < $end)
	{
		return 1 if $cond->();
		select(undef, undef, undef, 0.2);
	}
	return $cond->() ? 1 : 0;
}

# Sorted names of the .pmh files in a node's pmhash.directory.
sub pmh_files
{
	my ($node) = @_;
	opendir(my $dh, pmhash_dir($node)) or return ();
	my @files = sort grep { /\.pmh$/ } readdir $dh;
	closedir $dh;
	return @files;
}

# Sorted file names of the permanent pmhash indexes of the given databases.
sub live_files
{
	my ($node, @dbs) = @_;
	my @files;
	for my $db (@dbs)
	{
		push @files, split /\n/, $node->safe_psql($db,
			q{SELECT d.oid || '_' || pg_relation_filenode(c.oid) || '.pmh'
			  FROM pg_class c JOIN pg_am a ON a.oid = c.relam, pg_database d
			  WHERE a.amname = 'pmhash' AND c.relpersistence = 'p'
				AND d.datname = current_database()});
	}
	return sort @files;
}


# Parent pid and state of a process, from /proc; () if it is gone.
sub proc_stat
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/stat") or return ();
	my $stat = <$fh> // '';
	close $fh;
	my ($state, $ppid) = $stat =~ /\)\s+(\S)\s+(\d+)/ or return ();
	return ($ppid, $state);
}

# Pids of the live children of a process.
sub children_of
{
	my ($parent) = @_;
	opendir(my $dh, '/proc') or die "opendir /proc: $!";
	my @pids = grep { /^\d+$/ } readdir $dh;
	closedir $dh;
	return grep { my ($ppid) = proc_stat($_); defined $ppid && $ppid == $parent } @pids;
}

# Whether a process still runs (zombies count as gone).
sub running
{
	my ($pid) = @_;
	my ($ppid, $state) = proc_stat($pid);
	return defined $state && $state ne 'Z';
}

# The pid of a node's postmaster, from postmaster.pid.
sub postmaster_pid
{
	my ($node) = @_;
	open(my $fh, '<', $node->data_dir . '/postmaster.pid') or die "postmaster.pid: $!";
	my $pid = <$fh>;
	close $fh;
	chomp $pid;
	return $pid;
}

1;
