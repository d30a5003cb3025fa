# The damage matrix of pmhash index files: eleven kinds of damage (random
# bytes or zeros over the header, a flipped header byte, random bytes over
# the directory, a flipped segment header byte, random bytes over a bucket,
# truncation to half and to zero bytes, another index's file, a deleted
# file, a file extended with garbage), each done to a freshly rebuilt index
# once while the server runs and a live session has the file mapped, and
# once while the server is stopped; on a node whose files are on /dev/shm
# (pmem) and on one whose files are in the data directory (msync), both
# with data checksums, which pmhash follows for its buckets.
# After each damage, index and bitmap scans from a new connection (and from
# the live session) must agree with a seqscan or fail with a clean error
# (XX002 or 58P01, naming the index, with a REINDEX hint), pmhash_verify
# must report the damage, an INSERT must succeed or fail cleanly without
# adding its row, the server must not crash, and REINDEX must repair the
# index.  A crash or a hang is reported and waited out, so that every case
# runs.
use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery qw(new_node start_node pmhash_dir scan_sql);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $SEED = $ENV{PMHASH_DAMAGE_SEED} // 6006;
my $TIMEOUT = 60;       # seconds after which a statement counts as hung
my $INDEX = 'tbl_k';    # the index that is damaged
my $SPEC = [ $INDEX, 'tbl', 'k', '-g' ];    # scan_sql: every key, and 20 absent ones
my $LOST = join '|', 'server closed the connection', 'terminating connection because of crash',
  'connection to server', 'the database system is', 'no connection to the server';
$LOST = qr/$LOST/;    # what psql says when a crash took its connection
my $next_id = 1_000_000;    # ids of the rows the test inserts

note "random bytes come from srand($SEED + a checksum of the case's name) "
  . 'at the damage of each case; set PMHASH_DAMAGE_SEED to change it';

############################################################################
# Helpers
############################################################################

# $n random bytes.
sub random_bytes
{
	my ($n) = @_;
	return join '', map { chr int rand 256 } 1 .. $n;
}

# Stop a node at once and start it again (to end a hang).
sub restart_now
{
	my ($node) = @_;
	$node->stop('immediate', fail_ok => 1);
	start_node($node);
}

# Wait until a node accepts connections (after a crash the postmaster
# reinitializes by itself); if it does not come back, restart it.
sub wait_ready
{
	my ($node) = @_;
	return if $node->poll_query_until('postgres', 'SELECT true');
	fail($node->name . ': the server accepts connections again after a crash');
	restart_now($node);
}

# The kinds of damage: name and what it does to the file at $_[0] ($_[1] is
# another index's file); verify_may_pass: pmhash_verify may succeed.
my @KINDS = (
	{ name => 'header-random', damage => sub { write_bytes($_[0], 0, random_bytes(1024)) } },
	{ name => 'header-zeros', damage => sub { write_bytes($_[0], 0, "\0" x 1024) } },
	{
		name => 'header-byte',    # shard_bits
		damage => sub { change_byte($_[0], 40, sub { $_[0] ^ 0xFF }) }
	},
	{
		name => 'directory-random',
		damage => sub {
			my $shard_bits = unpack 'V', read_bytes($_[0], 40, 4);
			my $desc_unit = unpack 'Q<', read_bytes($_[0], 48, 8);
			write_bytes($_[0], $desc_unit * $UNIT, random_bytes(8 << $shard_bits));
		}
	},
	{
		name => 'segment-header-byte',    # nbuckets
		damage => sub {
			change_byte($_[0], find_segment($_[0], 0)->{unit} * $UNIT + 40, sub { $_[0] ^ 0xFF });
		}
	},
	{
		name => 'bucket-random',
		damage => sub {
			my $seg = find_segment($_[0], 0);
			my $bucket = int rand $seg->{nbuckets};
			note "random bytes over bucket $bucket of shard $seg->{shard}";
			write_bytes($_[0], ($seg->{unit} + 1 + $bucket) * $UNIT, random_bytes($UNIT));
		}
	},
	{ name => 'truncated-half', damage => sub { truncate($_[0], int((-s $_[0]) / 2)) or die $! } },
	{ name => 'truncated-zero', damage => sub { truncate($_[0], 0) or die "truncate: $!" } },
	{ name => 'other-file', damage => sub { copy($_[1], $_[0]) or die "copy: $!" } },
	{ name => 'deleted', damage => sub { unlink $_[0] or die "unlink: $!" } },
	{
		name => 'extended',
		verify_may_pass => 1,
		damage => sub {
			open(my $fh, '>>', $_[0]) or die "open: $!";
			print $fh random_bytes(65536);
			close $fh or die "close: $!";
		}
	});

# Run SQL for case $c from a new connection ($where 'new') or in the case's
# open session ('session'); returns (succeeded, stdout, stderr).  A
# connection lost to a crash is waited out; a hang is reported and ended by
# an immediate restart.
sub run_in
{
	my ($c, $where, $sql) = @_;
	my $node = $c->{node};
	my ($ok, $out, $err, $hung);
	if ($where eq 'new')
	{
		my $rc;
		($rc, $out, $err) = run_sql($node, 'postgres', $sql,
			timeout => $TIMEOUT, timed_out => \$hung);
		$ok = !$hung && $rc == 0;
	}
	else
	{
		return (0, '', 'the session was lost before') if $c->{session_lost};
		($out, $err) = eval { session_sql($c->{session}, $sql) };
		if (!defined $out)
		{
			$err = "the session failed: $@";
			$hung = $@ =~ /time/i && $c->{session}{run}->pumpable;
			$c->{session_lost} = 1;
		}
		$ok = defined $out && $err !~ /ERROR:|FATAL:|PANIC:|$LOST/;
	}
	if ($hung)
	{
		fail("$c->{name}: $where: a statement ends within $TIMEOUT s");
		diag "hung: $sql";
		$c->{session_lost} = 1;
		restart_now($node);
	}
	elsif (!$ok && $err =~ $LOST)
	{
		note "$c->{name}: $where: connection lost, waiting for the server";
		wait_ready($node);
	}
	return ($ok, $out // '', $err // '');
}

# Check a statement's outcome: if it failed, it must (unless strict, where
# it must succeed) have failed with a clean error: SQLSTATE XX002 or 58P01,
# the index's name in the message, a REINDEX hint.  Returns whether it
# succeeded.
sub check_outcome
{
	my ($name, $ok, $err, $strict) = @_;
	return 1 if $ok;
	if ($strict)
	{
		fail("$name: succeeds");
		diag $err;
		return 0;
	}
	note "$name: $err";
	like($err, qr/ERROR:  (?:XX002|58P01): [^\n]*\b\Q$INDEX\E\b/,
		"$name: fails with a clean XX002 or 58P01 error naming $INDEX");
	like($err, qr/HINT:  [^\n]*REINDEX INDEX \Q$INDEX\E\b/,
		"$name: the error hints at REINDEX INDEX $INDEX");
	return 0;
}

# Index and bitmap scans of every key of tbl (and of absent keys) from
# $where: each plan must use the index, each answer must be the seqscan's,
# or a clean error unless strict.
sub check_scans
{
	my ($c, $where, $strict) = @_;
	for my $scan ('index', 'bitmap')
	{
		my $name = "$c->{name}: $where $scan scan";
		my ($sets, $query) = scan_sql($SPEC, $scan);
		my $begin = "BEGIN; SET LOCAL enable_seqscan = off; $sets";
		my ($ok, $plan, $err) = run_in($c, $where, "$begin EXPLAIN (COSTS OFF) $query; COMMIT;");
		my $probe = $scan eq 'index'
		  ? qr/Index Scan using \Q$INDEX\E on tbl x/
		  : qr/Bitmap Index Scan on \Q$INDEX\E/;
		ok($plan =~ $probe && $plan =~ /Seq Scan on tbl\b/,
			"$name: the plan probes $INDEX per key, a seqscan the table")
		  or diag $plan
		  if check_outcome("$name: EXPLAIN", $ok, $err, $strict);
		my $row;
		($ok, $row, $err) = run_in($c, $where, "$begin $query; COMMIT;");
		next unless check_outcome($name, $ok, $err, $strict);
		my ($keys, $mismatches, $dups, $found, $md5, $examples) = split /\|/, $row, 6;
		is("$mismatches differing, $dups with a row twice", '0 differing, 0 with a row twice',
			"$name: finds what a seqscan finds for all " . ($keys // '?') . ' keys')
		  or diag $examples;
	}
}

# pmhash_verify of the damaged index must fail cleanly (for a kind that
# verify_may_pass it may instead count the non-null keys); strict: it must
# count them.
sub check_verify
{
	my ($c, $strict) = @_;
	my $name = "$c->{name}: pmhash_verify";
	my ($ok, $out, $err) =
	  run_in($c, 'new', "SELECT pmhash_verify('$INDEX'), (SELECT count(k) FROM tbl)");
	if ($ok && ($strict || $c->{kind}{verify_may_pass}))
	{
		my ($verified, $keys) = split /\|/, $out;
		is($verified, $keys, "$name: counts the $keys non-null keys");
		return;
	}
	return check_outcome($name, $ok, $err, 1) if $strict;
	ok(!$ok, "$name: reports the damage") or diag "it returned $out";
	check_outcome($name, $ok, $err);
}

# An INSERT into the damaged index's table must succeed or fail cleanly,
# and then not add its row.
sub check_insert
{
	my ($c) = @_;
	my $id = $next_id++;
	my $name = "$c->{name}: INSERT";
	my ($ok, $out, $err) = run_in($c, 'new', "INSERT INTO tbl VALUES ($id, 7)");
	return pass("$name: succeeds") if $ok;
	check_outcome($name, $ok, $err);
	($ok, $out, $err) = run_in($c, 'new', "$FORCE_SEQ SELECT count(*) FROM tbl WHERE id = $id");
	is($out, '0', "$name: the failed INSERT added no row") or diag $err;
}

# Open the case's session, and use the index in it (an index scan and an
# INSERT), so that the index is attached and its file mapped.
sub open_session
{
	my ($c) = @_;
	$c->{session} = start_session($c->{node}, 'postgres', timeout => $TIMEOUT);
	$c->{session}->set_query_timer_restart;
	my $id = $next_id++;
	my ($ok, $out, $err) = run_in($c, 'session',
		"$FORCE_INDEX SELECT count(*) FROM tbl WHERE k = 7; INSERT INTO tbl VALUES ($id, 7);");
	ok($ok, "$c->{name}: the session uses $INDEX before the damage") or diag $err;
}

# Close the case's session, whatever state it is in.
sub close_session
{
	my ($c) = @_;
	my $s = delete $c->{session} or return;
	return if eval { $s->quit; 1 };
	note "$c->{name}: closing the session: $@";
	eval { $s->{run}->kill_kill };
}

# One case: damage the file of a freshly rebuilt tbl_k in one way, 'live'
# (with a session using the index, the server running) or at a 'restart';
# check what the damaged index does, then that REINDEX repairs it, and
# that the server never crashed.
sub run_case
{
	my ($node, $kind, $situation) = @_;
	my $c = { node => $node, kind => $kind };
	$c->{name} = join ' ', $node->name, $kind->{name}, $situation;
	wait_ready($node);
	my ($ok, $out, $err) = run_in($c, 'new', "REINDEX INDEX $INDEX");
	ok($ok, "$c->{name}: the index is rebuilt before the damage") or diag $err;
	my $path = index_path($node, 'postgres', $INDEX);
	my $other = index_path($node, 'postgres', 'other_k');
	my $seed = $SEED + unpack('%32C*', $c->{name});
	if ($situation eq 'live')
	{
		$c->{mark} = mark($node);
		open_session($c);
		srand($seed);
		$kind->{damage}->($path, $other);
	}
	else
	{
		$node->stop;
		srand($seed);
		$kind->{damage}->($path, $other);
		start_node($node);
		$c->{mark} = mark($node);
	}
	note "$c->{name}: damaged $path, srand($seed)";

	check_scans($c, 'new');
	check_scans($c, 'session') if $c->{session};
	check_verify($c);
	check_insert($c);
	close_session($c);

	($ok, $out, $err) = run_in($c, 'new', "REINDEX INDEX $INDEX");
	ok($ok, "$c->{name}: REINDEX succeeds") or diag $err;
	my $name = $c->{name};
	$c->{name} .= ' after REINDEX';
	check_scans($c, 'new', 1);
	check_verify($c, 1);
	wait_ready($node);
	check_alive($node, $c->{mark}, $name);
}

# Create and start a node with data checksums (so that pmhash checks its
# buckets and posting blocks too), table tbl (40000 rows of 4000 keys, plus
# 3000 rows of keys 0..2 so that posting chains exist) indexed by tbl_k, and
# a smaller table other indexed by other_k.
sub setup_node
{
	my ($name, %opt) = @_;
	my $node = new_node($name, %opt, init => { extra => ['--data-checksums'] });
	start_node($node);
	$node->safe_psql('postgres', <<'EOS');
CREATE EXTENSION pmhash;
CREATE TABLE tbl (id int, k int);
INSERT INTO tbl SELECT i, i % 4000 FROM generate_series(1, 40000) i;
INSERT INTO tbl SELECT i, i % 3 FROM generate_series(40001, 43000) i;
CREATE INDEX tbl_k ON tbl USING pmhash (k);
CREATE TABLE other (id int, k int);
INSERT INTO other SELECT i, i % 100 FROM generate_series(1, 2000) i;
CREATE INDEX other_k ON other USING pmhash (k);
ANALYZE;
EOS
	cmp_ok($node->safe_psql('postgres', "SELECT chains FROM pmhash_stats('$INDEX')"),
		'>', 0, "$name: $INDEX has posting chains");
	return $node;
}

############################################################################
# The matrix: nodes x kinds x situations.
############################################################################

for my $setup ([ 'pmem', dir => 'shm', force => 1 ], [ 'msync', dir => 'default', force => 0 ])
{
	my $node = setup_node(@$setup);
	like(pmhash_dir($node), $node->name eq 'pmem' ? qr{^/dev/shm/} : qr{/pmhash$},
		$node->name . ': the index files are in ' . pmhash_dir($node));
	for my $kind (@KINDS)
	{
		run_case($node, $kind, $_) for qw(live restart);
	}
	$node->stop('fast', fail_ok => 1);
	unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/,
		$node->name . ': no crash in the whole server log');
}

done_testing();
