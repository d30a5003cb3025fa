# Unique pmhash indexes across crash recovery, on a hot standby and after
# its promotion, on both persistence paths.
#
# Two primaries: "pmem" keeps its index files on /dev/shm with
# PMEM_IS_PMEM_FORCE=1 (flush-and-fence path; data checksums, so that the
# files keep bucket checksums), "msync" keeps them in the default directory
# inside its data directory with PMEM_IS_PMEM_FORCE=0 (msync path).  Each
# has table uq with unique pmhash indexes on an int8 column (uq_id), a text
# column (uq_code), an expression (uq_email, on lower(email)) and a partial
# one (uq_grp, on grp WHERE active).  A pgbench workload of upserts (ON
# CONFLICT DO UPDATE through the int8 and the partial index, DO NOTHING
# through the expression index and with no target), plain inserts of keys
# that may exist, deletes, HOT updates and updates of each kind of key
# catches its unique violations (and must see no other error).
#
# Each of two rounds per node, under that workload, commits deletes, key
# changes, inserts, upserts and a HOT update of known rows, leaves other
# changes of known rows uncommitted in open transactions (inserts, a
# delete, a key change, an upsert, a speculative insertion, a HOT update),
# and crashes the node (immediate shutdown, or kill -9 of the postmaster),
# with a CHECKPOINT between the committed and the uncommitted changes in
# round 1, before both in round 2 (so recovery flags unverified entries,
# which the uniqueness checks then meet).  After the restart:
#  - every key of every index, by index scan and by bitmap scan, finds the
#    rows a seqscan finds (the plans are checked), and no key appears twice
#    among the visible rows;
#  - pmhash_verify passes;
#  - inserting a row with any existing key of any index fails with SQLSTATE
#    23505 naming that index (a PL/pgSQL handler of unique_violation
#    reports it; every other error fails the test), and so does a plain
#    INSERT from psql (message and SQLSTATE checked);
#  - the rows have exactly the committed changes; the keys of committed
#    deletes and of the old side of committed key changes, and the keys of
#    the inserts and key changes in flight at the crash, can be inserted
#    again (they are, by INSERT, ON CONFLICT DO NOTHING and DO UPDATE);
#  - ON CONFLICT DO UPDATE through each of the four indexes updates the
#    existing row, and DO NOTHING leaves it.
#
# Then a base backup of each primary is taken under the workload, while the
# unique indexes exist, and a streaming standby started from it (on the
# same path); the primary creates a unique index uq_tag with CREATE UNIQUE
# INDEX CONCURRENTLY and REINDEXes uq_code CONCURRENTLY under the workload,
# runs more of it, and a third round of known changes, committed and left
# open.  On the standby, while it replays and once it has caught up, index
# and bitmap scans of every key equal its seqscans (and, once caught up,
# the primary's), no key is visible twice, pmhash_verify passes.  On the
# pmem path the base backup has no index files (they are outside the data
# directory): there the indexes that existed at the backup must fail
# cleanly until promotion (the documented 55000, or 58P01 for the missing
# file, which is what the standby reports before its end of recovery), and
# the two built after the backup must be right.  The standby is then
# promoted, with the third round's transactions still open on the primary;
# on the pmem path the first use of uq_email is a query, which rebuilds it
# from its table, and that of uq_id and uq_grp an INSERT of an existing key,
# which must fail as a duplicate and rebuild them (the rebuild does not
# check uniqueness again, and the insert skips the entry the rebuild took
# from the table).  Then every
# check of a restarted node (above) holds on it, including the duplicate
# refusals of uq_tag.  The server logs must show no error or crash other
# than the errors the test causes.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# The unique indexes: name, key and predicate (%s is the table's alias),
# values that no row has (of generate_series g), and an expression counting
# the keys the index holds (for pmhash_verify).
my @BASE_SPECS = (
	{ index => 'uq_id', key => '%s.id', absent => '-g', count => 'id' },
	{ index => 'uq_code', key => '%s.code', absent => "'absent' || g", count => 'code' },
	{
		index => 'uq_email',
		key => 'lower(%s.email)',
		absent => "'absent' || g || '\@x'",
		count => 'lower(email)'
	},
	{
		index => 'uq_grp',
		key => '%s.grp',
		pred => '%s.active',
		absent => '-g',
		count => 'CASE WHEN active THEN grp END'
	});
my $TAG_SPEC = { index => 'uq_tag', key => '%s.tag', absent => "'absent' || g", count => 'tag' };
my @ALL_SPECS = (@BASE_SPECS, $TAG_SPEC);

my $work = PostgreSQL::Test::Utils::tempdir() . '/uq_work.sql';
PostgreSQL::Test::Utils::append_to_file($work, "SELECT uq_work();\n");

############################################################################
# The table, its indexes and the functions of the workload and the checks.
############################################################################

# Rows 5101..5115, 5201..5215, ... (round r: 5000 + 100 r + 1..15) are the
# known rows of round r, with keys of their own (uq_add): the workload never
# touches them.  They come first, so that their heap pages keep room for
# their HOT updates.  Rows 1..2000 belong to the workload (ids, codes and
# e-mail addresses of 1..3000, groups of active rows below 300).
my $SETUP = <<'EOS';
CREATE EXTENSION pmhash;
CREATE TABLE uq (id int8 NOT NULL, code text, email text, grp int,
	active bool NOT NULL DEFAULT false, tag text, n int NOT NULL DEFAULT 0, pad text)
	WITH (fillfactor = 50, autovacuum_enabled = false);
-- a known row: its keys are id, 'd' || id, 'det' || id || '@example.com', 100000 + id, 'dt' || id
CREATE FUNCTION uq_add(i int8) RETURNS void LANGUAGE sql AS $$
	INSERT INTO uq (id, code, email, grp, active, tag)
	VALUES (i, 'd' || i, 'Det' || i || '@Example.COM', 100000 + i, true, 'dt' || i)
$$;
SELECT uq_add(5000 + 100 * r + j) FROM generate_series(1, 4) r, generate_series(1, 15) j;
INSERT INTO uq (id, code, email, grp, active, tag)
	SELECT i, 'c' || i, 'User' || i || '@Example.COM',
		CASE WHEN i % 10 = 0 THEN i / 10 ELSE i % 7 END, i % 10 = 0,
		CASE WHEN i % 3 = 0 THEN 't' || i END
	FROM generate_series(1, 2000) i;
CREATE UNIQUE INDEX uq_id ON uq USING pmhash (id);
CREATE UNIQUE INDEX uq_code ON uq USING pmhash (code);
CREATE UNIQUE INDEX uq_email ON uq USING pmhash (lower(email));
CREATE UNIQUE INDEX uq_grp ON uq USING pmhash (grp) WHERE active;
ANALYZE uq;
CREATE SEQUENCE uq_dups;                      -- unique violations the workload ran into
CREATE SEQUENCE uq_fresh START 10000000000;   -- ids of the rows uq_try inserts
-- a move: every key of a row changes
CREATE FUNCTION uq_move(i int8) RETURNS void LANGUAGE sql AS $$
	UPDATE uq SET id = id + 900000, code = code || 'm', email = 'Moved' || id || '@X.org',
		grp = grp + 900000, tag = tag || 'm'
	WHERE id = i
$$;
-- one transaction of the workload
CREATE FUNCTION uq_work() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	op int := floor(random() * 12)::int;
	k int8 := 1 + floor(random() * 3000)::int8;
	k2 int8 := 1 + floor(random() * 3000)::int8;
	t text := CASE WHEN k % 3 = 0 THEN 't' || k END;
BEGIN
	CASE op
	WHEN 0, 1 THEN   -- upsert; the update is HOT (n and pad are in no index)
		INSERT INTO uq (id, code, email, grp, tag)
		VALUES (k, 'c' || k, 'User' || k || '@Example.COM', k % 7, t)
		ON CONFLICT (id) DO UPDATE SET n = uq.n + 1, pad = repeat('p', uq.n % 40);
	WHEN 2 THEN      -- the same address in other letters is a conflict
		INSERT INTO uq (id, code, email, grp, tag)
		VALUES (k, 'c' || k, 'USER' || k || '@example.com', k % 7, t)
		ON CONFLICT (lower(email)) DO NOTHING;
	WHEN 3 THEN
		INSERT INTO uq (id, code, email, grp, tag)
		VALUES (k, 'c' || k, 'user' || k || '@example.com', k % 7, t)
		ON CONFLICT DO NOTHING;
	WHEN 4 THEN      -- an existing key raises unique_violation
		INSERT INTO uq (id, code, email, grp, tag)
		VALUES (k, 'c' || k, 'user' || k || '@EXAMPLE.com', k % 7, t);
	WHEN 5, 6 THEN
		DELETE FROM uq WHERE id = k;
	WHEN 7 THEN      -- HOT
		UPDATE uq SET n = n + 1 WHERE id = k;
	WHEN 8 THEN      -- a new text key
		UPDATE uq SET code = 'c' || k2 WHERE id = k;
	WHEN 9 THEN      -- a new int8 key (tag stays 't' || id, so unique too)
		UPDATE uq SET id = k2, tag = CASE WHEN tag IS NOT NULL THEN 't' || k2 END WHERE id = k;
	WHEN 10 THEN     -- in or out of the partial index, with a new key
		UPDATE uq SET active = NOT active, grp = k2 % 300 WHERE id = k;
	ELSE             -- upsert through the partial index
		INSERT INTO uq (id, code, email, grp, active, tag)
		VALUES (k, 'c' || k, 'User' || k || '@Example.COM', k2 % 300, true, t)
		ON CONFLICT (grp) WHERE active DO UPDATE SET n = uq.n + 1;
	END CASE;
EXCEPTION WHEN unique_violation THEN
	PERFORM nextval('uq_dups');
END $$;
-- insert a row that has key v for index idx, and no key of the other indexes
CREATE FUNCTION uq_dup_row(idx text, v text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	CASE idx
	WHEN 'uq_id' THEN INSERT INTO uq (id) VALUES (v::int8);
	WHEN 'uq_code' THEN INSERT INTO uq (id, code) VALUES (nextval('uq_fresh'), v);
	WHEN 'uq_email' THEN INSERT INTO uq (id, email) VALUES (nextval('uq_fresh'), upper(v));
	WHEN 'uq_grp' THEN INSERT INTO uq (id, grp, active) VALUES (nextval('uq_fresh'), v::int, true);
	WHEN 'uq_tag' THEN INSERT INTO uq (id, tag) VALUES (nextval('uq_fresh'), v);
	END CASE;
END $$;
-- try that insert and undo it: '23505 <message>' if it raised unique_violation,
-- 'inserted' if it succeeded; any other error propagates
CREATE FUNCTION uq_try(idx text, v text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text;
	msg text;
BEGIN
	PERFORM uq_dup_row(idx, v);
	RAISE EXCEPTION USING ERRCODE = 'PMH01', MESSAGE = 'undo the insert';
EXCEPTION
	WHEN unique_violation THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		RETURN state || ' ' || msg;
	WHEN SQLSTATE 'PMH01' THEN
		RETURN 'inserted';
END $$;
EOS

############################################################################
# Checks.
############################################################################

# The key or predicate expression of an index spec for a table alias.
sub key_of
{
	my ($spec, $alias) = @_;
	return sprintf $spec->{key}, $alias;
}

sub pred_of
{
	my ($spec, $alias) = @_;
	return $spec->{pred} ? sprintf($spec->{pred}, $alias) : 'true';
}

# What uq_try returns for a key that exists.
sub refused
{
	my ($index) = @_;
	return qq{23505 duplicate key value violates unique constraint "$index"};
}

# SQL comparing, for every key of an index (and some absent ones), the ids
# one kind of scan finds with those of a seqscan; gives keys, mismatching
# keys, keys of more than one visible row, rows found, an md5 of the
# per-key results, and a few mismatches.
sub scan_query
{
	my ($spec, $kind) = @_;
	my ($kt, $pt, $kx, $px) =
	  (key_of($spec, 't'), pred_of($spec, 't'), key_of($spec, 'x'), pred_of($spec, 'x'));
	my $sets = $kind eq 'index'
	  ? 'SET LOCAL enable_indexscan = on; SET LOCAL enable_bitmapscan = off;'
	  : 'SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = on;';
	my $query = <<"EOQ";
WITH s AS MATERIALIZED (
	SELECT $kt AS v, array_agg(t.id ORDER BY t.id) AS ids FROM uq t
	WHERE $kt IS NOT NULL AND $pt GROUP BY 1),
p AS (SELECT v, ids FROM s UNION ALL SELECT $spec->{absent}, NULL::int8[] FROM generate_series(1, 20) g),
r AS MATERIALIZED (
	SELECT v, ids AS want,
		(SELECT array_agg(x.id ORDER BY x.id) FROM uq x WHERE $kx = p.v AND $px) AS got
	FROM p)
SELECT count(*),
	count(*) FILTER (WHERE got IS DISTINCT FROM want),
	count(*) FILTER (WHERE cardinality(want) > 1),
	coalesce(sum(cardinality(got)), 0),
	md5(coalesce(string_agg(v || ':' || coalesce(got::text, '-'), ' ' ORDER BY v), '')),
	coalesce((SELECT string_agg(left(e.v || ': $kind scan ' || coalesce(e.got::text, '{}')
		|| ', seqscan ' || coalesce(e.want::text, '{}'), 200), '; ')
		FROM (SELECT * FROM r WHERE got IS DISTINCT FROM want OR cardinality(want) > 1
			ORDER BY v LIMIT 4) e), '')
FROM r
EOQ
	return ($sets, $query);
}

# In one REPEATABLE READ snapshot, for each index: the plans probe the index
# per key, index and bitmap scans find for every key what a seqscan finds,
# and no key belongs to two visible rows.  Returns index => md5 of its
# per-key results.
sub check_scans
{
	my ($node, $name, @specs) = @_;
	my $sql = "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSET LOCAL enable_seqscan = off;\n";
	for my $spec (@specs)
	{
		for my $kind ('index', 'bitmap')
		{
			my ($sets, $query) = scan_query($spec, $kind);
			$sql .= "\\echo ### $spec->{index} $kind\n$sets\nEXPLAIN (COSTS OFF) $query;\n$query;\n";
		}
	}
	$sql .= "COMMIT;\n";
	my ($rc, $out, $err) = $node->psql('postgres', $sql);
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
		my $index = $spec->{index};
		for my $kind ('index', 'bitmap')
		{
			my $r = $result{"$index $kind"};
			my $node_re = $kind eq 'index'
			  ? qr/Index Scan using \Q$index\E on uq x/
			  : qr/Bitmap Index Scan on \Q$index\E/;
			ok($r && $r->{plan} =~ $node_re && $r->{plan} =~ /Seq Scan on uq t\b/,
				"$name: $index: the $kind scan query probes the index per key")
			  or diag($r ? $r->{plan} : 'no output');
			my ($keys, $mismatches, $twice, $found, $md5, $examples) =
			  split /\|/, $r ? $r->{row} : '', 6;
			$examples //= '';
			is($mismatches, '0',
				"$name: $index: $kind scans find what the seqscan finds for all "
				  . ($keys // '?') . ' keys (' . ($found // '?') . ' rows)')
			  or diag "$index: $examples";
			if ($kind eq 'index')
			{
				is($twice, '0', "$name: $index: no key belongs to two visible rows")
				  or diag "$index: $examples";
				$digest{$index} = $md5;
			}
		}
	}
	return \%digest;
}

# pmhash_verify passes and counts at least the keys of the visible rows.
sub check_verify_all
{
	my ($node, $name, @specs) = @_;
	check_verify($node, 'postgres', $name, 0, map { [ $_->{index}, 'uq', $_->{count} ] } @specs);
	return;
}

# Inserting a row with any key of a visible row fails with 23505 naming the
# index, for every key of every index.
sub check_refusals
{
	my ($node, $name, @specs) = @_;
	for my $spec (@specs)
	{
		my $index = $spec->{index};
		my ($kt, $pt) = (key_of($spec, 't'), pred_of($spec, 't'));
		my ($rc, $out, $err) = $node->psql('postgres', <<"EOQ");
WITH k AS MATERIALIZED (SELECT DISTINCT ($kt)::text AS v FROM uq t WHERE $kt IS NOT NULL AND $pt),
r AS MATERIALIZED (SELECT v, uq_try('$index', v) AS got FROM k)
SELECT count(*), count(*) FILTER (WHERE got = '${\refused($index)}'),
	coalesce((SELECT string_agg(v || ': ' || got, '; ')
		FROM (SELECT * FROM r WHERE got <> '${\refused($index)}' ORDER BY v LIMIT 5) e), '')
FROM r
EOQ
		if (!is($rc, 0, "$name: $index: inserting each existing key runs without other errors"))
		{
			diag $err;
			next;
		}
		my ($keys, $ok, $examples) = split /\|/, $out, 3;
		cmp_ok($keys, '>', 0, "$name: $index: there are keys to try");
		is($ok, $keys, "$name: $index: inserting any of the $keys existing keys fails with 23505")
		  or diag $examples;
	}
	return;
}

# The keys of known row $i for each index, as uq_try takes them; moved ones
# after uq_move.
sub keys_of
{
	my ($i, $moved) = @_;
	return $moved
	  ? (uq_id => $i + 900000, uq_code => "d${i}m", uq_email => "moved$i\@x.org",
		uq_grp => 100000 + $i + 900000, uq_tag => "dt${i}m")
	  : (uq_id => $i, uq_code => "d$i", uq_email => "det$i\@example.com", uq_grp => 100000 + $i,
		uq_tag => "dt$i");
}

# uq_try for keys of known rows: each of @rows ([id, moved]) for each index
# of @specs must give $want ('refused' or 'inserted').
sub check_tries
{
	my ($node, $name, $want, $specs, @rows) = @_;
	my (@values, @expected);
	for my $row (@rows)
	{
		my %keys = keys_of(@$row);
		for my $spec (@$specs)
		{
			my $index = $spec->{index};
			push @values, "('$index', '$keys{$index}')";
			push @expected,
			  "$index $keys{$index}: " . ($want eq 'refused' ? refused($index) : 'inserted');
		}
	}
	my ($rc, $out, $err) = $node->psql('postgres',
		    "SELECT idx || ' ' || v || ': ' || uq_try(idx, v) FROM (VALUES "
		  . join(', ', @values) . ') k(idx, v)');
	is($rc, 0, "$name: trying the keys runs without other errors") or diag $err;
	is(join("\n", sort split /\n/, $out), join("\n", sort @expected),
		"$name: keys that must be $want are $want");
	return;
}

# The lines of psql output that are not those of functions returning void
# (uq_add, uq_move).
sub results
{
	my ($out) = @_;
	return join "\n", grep { !/^\|*$/ } split /\n/, $out;
}

# Ids and n of the known rows of a round, read by seqscan.
sub known_rows
{
	my ($node, $r) = @_;
	my ($base, $nn, $m) = (5000 + 100 * $r, 2000000 + 100 * $r, 3000000 + 100 * $r);
	my @ids = ((map { $base + $_ } 1 .. 15), (map { $nn + $_ } 1 .. 4), (map { $m + $_ } 1 .. 3),
		$base + 3 + 900000, $base + 9 + 900000);
	return $node->safe_psql('postgres',
		    'SET enable_indexscan = off; SET enable_bitmapscan = off; '
		  . "SELECT string_agg(id || ':' || n, ' ' ORDER BY id) FROM uq WHERE id IN ("
		  . join(', ', @ids) . ')');
}

# Round $r of known changes on $node: committed ones, and uncommitted ones
# left open in two sessions, which are returned.  $checkpoint: 'before' or
# 'between' (the committed and the uncommitted changes) or none.
sub known_changes
{
	my ($node, $r, $checkpoint) = @_;
	my ($base, $nn, $m) = (5000 + 100 * $r, 2000000 + 100 * $r, 3000000 + 100 * $r);
	my $name = $node->name . ", round $r";
	$node->safe_psql('postgres', 'CHECKPOINT') if $checkpoint eq 'before';
	my $out = $node->safe_psql('postgres', <<"EOS");
DELETE FROM uq WHERE id IN ($base + 1, $base + 2);
SELECT uq_move($base + 3);
SELECT uq_add($nn + 1), uq_add($nn + 2);
INSERT INTO uq (id, code) VALUES ($base + 4, 'z$base') ON CONFLICT (id) DO UPDATE SET n = uq.n + 7;
BEGIN;
CREATE TEMP TABLE hot AS SELECT pg_stat_get_xact_tuples_hot_updated('uq'::regclass) AS before;
UPDATE uq SET n = n + 5, pad = 'hot' WHERE id = $base + 5;
SELECT 'hot ' || (pg_stat_get_xact_tuples_hot_updated('uq'::regclass) - before) FROM hot;
DROP TABLE hot;
COMMIT;
INSERT INTO uq (id, code, email) VALUES ($nn + 3, 'd' || ($nn + 3), 'DET' || ($base + 6) || '\@EXAMPLE.COM')
	ON CONFLICT (lower(email)) DO UPDATE SET n = uq.n + 3 RETURNING 'email upsert ' || id;
INSERT INTO uq (id, code) VALUES ($base + 7, 'z$base') ON CONFLICT DO NOTHING RETURNING 'inserted ' || id;
INSERT INTO uq (id, code, email, grp, active, tag)
	VALUES ($nn + 4, 'd' || ($nn + 4), 'Det' || ($nn + 4) || '\@Example.COM', 100000 + $nn + 4, true, 'dt' || ($nn + 4))
	ON CONFLICT (code) DO NOTHING RETURNING 'inserted ' || id;
EOS
	is(results($out), "hot 1\nemail upsert " . ($base + 6) . "\ninserted " . ($nn + 4),
		"$name: committed changes: a HOT update, an upsert through lower(email), DO NOTHING");
	$node->safe_psql('postgres', 'CHECKPOINT') if $checkpoint eq 'between';

	my @sessions = map { $node->background_psql('postgres') } 1 .. 2;
	$sessions[0]->query_safe(<<"EOS");
BEGIN;
SELECT uq_add($m + 1), uq_add($m + 2);
INSERT INTO uq (id, code, email, grp, active, tag)
	VALUES ($m + 3, 'd' || ($m + 3), 'Det' || ($m + 3) || '\@Example.COM', 100000 + $m + 3, true, 'dt' || ($m + 3))
	ON CONFLICT DO NOTHING;
EOS
	$sessions[1]->query_safe(<<"EOS");
BEGIN;
DELETE FROM uq WHERE id = $base + 8;
SELECT uq_move($base + 9);
INSERT INTO uq (id, code) VALUES ($base + 10, 'z$base') ON CONFLICT (id) DO UPDATE SET n = uq.n + 100;
UPDATE uq SET n = n + 1000 WHERE id = $base + 11;
EOS
	# the uncommitted changes are in shared memory and the index files
	my $open = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'");
	is($open, 2, "$name: two transactions are left open");
	return @sessions;
}

# The state of the known rows of round $r once the open transactions died.
sub expected_rows
{
	my ($r) = @_;
	my ($base, $nn) = (5000 + 100 * $r, 2000000 + 100 * $r);
	my %n = (($base + 3 + 900000) => 0, ($base + 4) => 7, ($base + 5) => 5, ($base + 6) => 3,
		($nn + 1) => 0, ($nn + 2) => 0, ($nn + 4) => 0,
		map { ($base + $_) => 0 } 7 .. 15);
	return join ' ', map { "$_:$n{$_}" } sort { $a <=> $b } keys %n;
}

# After a crash or a promotion that ended round $r's open transactions:
# what must be refused and what accepted, then inserts of the freed keys,
# and ON CONFLICT on existing keys.
sub check_round
{
	my ($node, $r, $specs) = @_;
	my ($base, $nn, $m, $f) =
	  (5000 + 100 * $r, 2000000 + 100 * $r, 3000000 + 100 * $r, 4000000 + 100 * $r);
	my $name = $node->name . ", after round $r";
	is(known_rows($node, $r), expected_rows($r),
		"$name: the known rows have the committed changes and none of the uncommitted ones");
	check_tries($node, "$name: existing keys", 'refused', $specs,
		[ $base + 3, 1 ], map({ [ $base + $_ ] } 4 .. 15), [ $nn + 1 ], [ $nn + 2 ], [ $nn + 4 ]);
	check_tries($node, "$name: deleted, moved away, upserted and in-flight keys", 'inserted',
		$specs, [ $base + 1 ], [ $base + 2 ], [ $base + 3 ], [ $base + 9, 1 ], [ $nn + 3 ],
		map { [ $m + $_ ] } 1 .. 3);

	# a plain INSERT of an existing key, from psql
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nINSERT INTO uq (id) VALUES ($base + 4)");
	like($err, qr/ERROR:  23505: duplicate key value violates unique constraint "uq_id"\nDETAIL:  Key \(id\)=\(${\($base + 4)}\) already exists\./,
		"$name: a plain INSERT of an existing key fails with 23505");

	# the freed keys are taken again, by each kind of insert
	($rc, $out, $err) = $node->psql('postgres', <<"EOS");
SELECT uq_add($base + 1);
SELECT uq_add($m + 1);
SELECT uq_move($base + 9);
INSERT INTO uq (id, code, email, grp, active, tag)
	VALUES ($m + 2, 'd' || ($m + 2), 'Det' || ($m + 2) || '\@Example.COM', 100000 + $m + 2, true, 'dt' || ($m + 2))
	ON CONFLICT DO NOTHING RETURNING 'inserted ' || id;
INSERT INTO uq (id, code, email, grp, active, tag)
	VALUES ($m + 3, 'd' || ($m + 3), 'Det' || ($m + 3) || '\@Example.COM', 100000 + $m + 3, true, 'dt' || ($m + 3))
	ON CONFLICT (id) DO UPDATE SET n = uq.n + 1 RETURNING 'upserted ' || id || ' ' || n;
EOS
	is($rc, 0, "$name: the freed keys can be inserted again") or diag $err;
	is(results($out), 'inserted ' . ($m + 2) . "\nupserted " . ($m + 3) . ' 0',
		"$name: ON CONFLICT inserts the keys whose inserts were in flight");

	# ON CONFLICT on existing keys, through each index
	($rc, $out, $err) = $node->psql('postgres', <<"EOS");
INSERT INTO uq (id, code) VALUES ($base + 12, 'z$f') ON CONFLICT (id) DO UPDATE SET n = uq.n + 1
	RETURNING 'id ' || id || ' ' || n;
INSERT INTO uq (id, email) VALUES ($f + 1, 'DET' || ($base + 13) || '\@example.com')
	ON CONFLICT (lower(email)) DO UPDATE SET n = uq.n + 1 RETURNING 'email ' || id || ' ' || n;
INSERT INTO uq (id, code) VALUES ($f + 2, 'd' || ($base + 14))
	ON CONFLICT (code) DO UPDATE SET n = uq.n + 1 RETURNING 'code ' || id || ' ' || n;
INSERT INTO uq (id, grp, active) VALUES ($f + 3, 100000 + $base + 15, true)
	ON CONFLICT (grp) WHERE active DO UPDATE SET n = uq.n + 1 RETURNING 'grp ' || id || ' ' || n;
INSERT INTO uq (id, code) VALUES ($base + 12, 'z$f') ON CONFLICT (id) DO NOTHING RETURNING 'inserted ' || id;
INSERT INTO uq (id, code) VALUES ($f + 4, 'd' || ($base + 14)) ON CONFLICT DO NOTHING RETURNING 'inserted ' || id;
SELECT count(*) FROM uq WHERE id BETWEEN $f AND $f + 99;
EOS
	is($rc, 0, "$name: ON CONFLICT on existing keys runs") or diag $err;
	is($out,
		join("\n", 'id ' . ($base + 12) . ' 1', 'email ' . ($base + 13) . ' 1', 'code ' . ($base + 14) . ' 1',
			'grp ' . ($base + 15) . ' 1', '0'),
		"$name: ON CONFLICT DO UPDATE through each index updates the existing row, DO NOTHING leaves it");
	return;
}

# Every check of a node's indexes; returns the scans' digests.
sub check_all
{
	my ($node, $name, @specs) = @_;
	my $digests = check_scans($node, $name, @specs);
	check_verify_all($node, $name, @specs);
	check_refusals($node, $name, @specs);
	return $digests;
}

############################################################################
# Crashes.
############################################################################

# Crash a node by an immediate shutdown or kill -9 of its postmaster, and
# start it again.
sub crash
{
	my ($node, $kind) = @_;
	if ($kind eq 'postmaster')
	{
		my $pid = postmaster_pid($node);
		my @children = children_of($pid);
		$node->kill9;
		# the lock file stays taken until the postmaster is reaped, not just dead
		ok(wait_until(60, sub { !kill(0, $pid) && !grep { running($_) } @children }),
			$node->name . ': the killed postmaster and its children are gone');
	}
	else
	{
		$node->stop('immediate');
	}
	start_node($node);
	return;
}

my %paths = (
	pmem => { dir => 'shm', force => 1, init => [ '--data-checksums' ] },
	msync => { dir => 'default', force => 0, init => [] });
my %primary;
for my $path (sort keys %paths)
{
	my $p = $paths{$path};
	my $node = new_node($path, dir => $p->{dir}, force => $p->{force},
		init => { allows_streaming => 1, extra => $p->{init} });
	start_node($node);
	$node->safe_psql('postgres', $SETUP);
	is($node->safe_psql('postgres', 'SELECT bool_and(s.is_pmem) FROM '
		  . "unnest(ARRAY['uq_id', 'uq_code', 'uq_email', 'uq_grp']) i, pmhash_stats(i::regclass) s"),
		$path eq 'pmem' ? 't' : 'f', "$path: the index files take the $path path");
	$primary{$path} = $node;
	check_scans($node, "$path: fresh indexes", @BASE_SPECS);
}

for my $r (1, 2)
{
	for my $path (sort keys %paths)
	{
		my $node = $primary{$path};
		my $kind = ($r == 1) == ($path eq 'pmem') ? 'immediate' : 'postmaster';
		my $name = "$path, round $r ($kind crash)";
		my $offset = log_offset($node);
		my $load = start_pgbench($node, 'postgres', clients => 3, seconds => 60, rate => 150,
			scripts => [$work]);
		sleep 2;
		my @sessions = known_changes($node, $r, $r == 1 ? 'between' : 'before');
		sleep 1;
		crash($node, $kind);
		eval { $_->quit } for @sessions;
		my ($rc, $out) = finish_pgbench($load);
		unlike($out, qr/ERROR:/, "$name: the workload saw no SQL error before the crash")
		  or diag $out;
		like($out, qr/aborted|terminat|closed/, "$name: the crash cut the workload short")
		  or diag $out;
		like(slurp_file($node->logfile, $offset),
			qr/database system was (?:interrupted|not properly shut down)|automatic recovery in progress/,
			"$name: the node went through crash recovery");
		like(slurp_file($node->logfile, $offset), qr/pmhash: \d+ entries of "[^"]*" changed after the redo point/,
			"$name: recovery flagged unverified entries, which the uniqueness checks meet");
		check_all($node, $name, @BASE_SPECS);
		check_round($node, $r, \@BASE_SPECS);
		check_scans($node, "$name, after the known changes", @BASE_SPECS);
		check_log($node, $offset, $name, qr/duplicate key value violates unique constraint "uq_id"/);
	}
}
for my $path (sort keys %paths)
{
	my ($dups) = $primary{$path}->safe_psql('postgres', 'SELECT last_value FROM uq_dups');
	cmp_ok($dups, '>', 10, "$path: the workload ran into unique violations ($dups)");
}

############################################################################
# Standbys.
############################################################################

for my $path (sort keys %paths)
{
	my $p = $paths{$path};
	my $primary = $primary{$path};
	my $offset = log_offset($primary);
	my $load = start_pgbench($primary, 'postgres', clients => 3, seconds => 8, rate => 150,
		scripts => [$work]);
	sleep 1;
	$primary->backup("${path}_backup");
	my $standby = new_node_from_backup("${path}_standby", $primary, "${path}_backup",
		dir => $p->{dir}, force => $p->{force}, restore => { has_streaming => 1 },
		conf => "max_standby_streaming_delay = -1\nhot_standby_feedback = on\n"
		  . "wal_receiver_status_interval = 1s\n");
	start_node($standby);
	my ($rc, $out, $err) = $primary->psql('postgres',
		    "CREATE UNIQUE INDEX CONCURRENTLY uq_tag ON uq USING pmhash (tag);\n"
		  . "REINDEX INDEX CONCURRENTLY uq_code;\n");
	is($rc, 0, "$path: CREATE UNIQUE INDEX CONCURRENTLY and REINDEX CONCURRENTLY under load")
	  or diag $err;
	($rc, $out) = finish_pgbench($load);
	is($rc, 0, "$path: the workload during the base backup succeeded") or diag $out;

	# Indexes the standby can answer for: on the pmem path, the base backup
	# holds no index file, and those built before it wait for promotion.
	my @live = $path eq 'pmem' ? ($BASE_SPECS[1], $TAG_SPEC) : @ALL_SPECS;
	my @waiting = $path eq 'pmem' ? @BASE_SPECS[ 0, 2, 3 ] : ();
	$primary->wait_for_catchup($standby);

	# probes while the standby replays more of the workload
	$load = start_pgbench($primary, 'postgres', clients => 3, seconds => 6, rate => 150,
		scripts => [$work]);
	sleep 2;
	check_scans($standby, "$path standby, while replaying", @live);
	($rc, $out) = finish_pgbench($load);
	is($rc, 0, "$path: the workload while the standby replays succeeded") or diag $out;

	# known changes, committed and open, replayed
	my @sessions = known_changes($primary, 3, 'none');
	$primary->wait_for_catchup($standby);
	my $on_primary = check_scans($primary, "$path primary, with a standby", @ALL_SPECS);
	my $on_standby = check_scans($standby, "$path standby, caught up", @live);
	is_deeply($on_standby, { map { $_->{index} => $on_primary->{ $_->{index} } } @live },
		"$path: the standby finds for every key what the primary finds");
	check_verify_all($standby, "$path standby", @live);
	is(known_rows($standby, 3), known_rows($primary, 3),
		"$path standby: the known rows are those the primary's other sessions see");
	is(known_rows($standby, 3), expected_rows(3), "$path standby: ... with no uncommitted change");
	# On the pmem path, the indexes whose files the base backup lacks answer
	# with an error naming them until promotion: the documented one (55000,
	# README Troubleshooting, "A standby waiting for promotion") or, while
	# the standby has not yet made their placeholders, that their file is
	# missing (58P01).  Never with rows.
	my %keys = keys_of(5312);
	for my $spec (@waiting)
	{
		($rc, $out, $err) = $standby->psql('postgres',
			"\\set VERBOSITY verbose\nSET enable_seqscan = off; SET enable_bitmapscan = off;\n"
			  . 'SELECT count(*) FROM uq x WHERE ' . key_of($spec, 'x')
			  . " = '$keys{$spec->{index}}' AND " . pred_of($spec, 'x'));
		like($err,
			qr/ERROR:  (?:55000: pmhash index "$spec->{index}" must be rebuilt from its table, which cannot happen here|58P01: could not open file "[^"]*" of pmhash index "$spec->{index}")/,
			"$path standby: $spec->{index}, whose file is not in the base backup, fails cleanly until promotion"
		) or diag $out;
	}
	my $WAITING_ERRORS = qr/must be rebuilt from its table, which cannot happen here|could not open file "[^"]*" of pmhash index "uq_(?:id|email|grp)": No such file/;
	check_log($standby, 0, "$path standby before promotion", $WAITING_ERRORS);

	# promotion, with the round's transactions still open on the primary
	$standby->promote;
	is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', "$path: standby promoted");
	my $name = "$path promoted";
	if (@waiting)
	{
		# the first use of uq_email is a query: it rebuilds the index from its table
		is($standby->safe_psql('postgres',
				'SET enable_seqscan = off; SET enable_bitmapscan = off; '
				  . "SELECT id FROM uq WHERE lower(email) = 'det5312\@example.com'"),
			'5312', "$name: uq_email answers its first query");
		like(slurp_file($standby->logfile), qr/pmhash index "uq_email" was rebuilt from table "uq"/,
			"$name: uq_email was rebuilt from its table by its first query");

		# the first use of uq_id and uq_grp is an INSERT of a key that exists
		($rc, $out, $err) = $standby->psql('postgres',
			"SELECT uq_try('uq_id', '5313'); SELECT uq_try('uq_grp', '105313');");
		is($rc, 0, "$name: inserting existing keys as the first use of uq_id and uq_grp runs")
		  or diag $err;
		my @got = split /\n/, $out;
		is($got[0] // '', refused('uq_id'),
			"$name: an INSERT of an existing key that rebuilds uq_id fails as a duplicate");
		is($got[1] // '', refused('uq_grp'),
			"$name: an INSERT of an existing key that rebuilds uq_grp fails as a duplicate");
		like(slurp_file($standby->logfile), qr/pmhash index "$_" was rebuilt from table "uq"/,
			"$name: $_ was rebuilt from its table by that INSERT")
		  for qw(uq_id uq_grp);
	}
	check_round($standby, 3, \@ALL_SPECS);
	check_all($standby, $name, @ALL_SPECS);

	# the promoted node goes on with the workload
	$load = start_pgbench($standby, 'postgres', clients => 3, seconds => 4, rate => 150,
		scripts => [$work]);
	($rc, $out) = finish_pgbench($load);
	is($rc, 0, "$name: the workload succeeds") or diag $out;
	check_scans($standby, "$name, after more workload", @ALL_SPECS);
	check_verify_all($standby, "$name, after more workload", @ALL_SPECS);
	check_log($standby, 0, "$name",
		qr/$WAITING_ERRORS|duplicate key value violates unique constraint "uq_(id|grp)"/);

	eval { $_->quit } for @sessions;
	check_scans($primary, "$path primary, after the standby's promotion", @ALL_SPECS);
	check_log($primary, $offset, "$path primary, standby phase");
	$standby->stop;
	$primary->stop;
}

done_testing();
