# Scale-out with postgres_fdw: a coordinator's table hash-partitioned over
# three shard servers, each shard a table with a unique pmhash index.
#
# The coordinator (pmhash not preloaded: it holds no index) has table kv
# PARTITION BY HASH (k) whose partitions kv_0, kv_1, kv_2 are postgres_fdw
# foreign tables on the servers shard0, shard1, shard2 (Unix sockets, one
# user mapping each); every shard has table kv with a unique pmhash index
# kv_k on k.  Rows 1..$ROWS are inserted through the coordinator.  Then:
#  - an equality lookup of a key through the coordinator is pruned to the
#    partition that owns the key (satisfies_hash_partition on the
#    coordinator says which) and pushed down: EXPLAIN VERBOSE shows one
#    Foreign Scan, of that partition, whose Remote SQL has the WHERE; on
#    that shard idx_scan of kv_k increases, on the others it does not (the
#    counters are read once postgres_fdw's connections to the shards are
#    gone: a backend reports its counters before it leaves
#    pg_stat_activity);
#  - k = ANY(ARRAY[...]) with keys of two shards scans those two only, each
#    with the array pushed down, returns the rows of the keys that exist,
#    and probes kv_k on those two shards only;
#  - rows inserted through the coordinator land on the shard that owns
#    their key, and a duplicate key fails with 23505 from the shard's
#    kv_k; ON CONFLICT DO NOTHING without a target is done by the shard,
#    with a target it is refused (42P10: a foreign table has no unique
#    index), and an UPDATE of the key leaves the row on its shard, where
#    lookups of the new key through the coordinator do not find it (what
#    README "Scale-out with postgres_fdw" says);
#  - pgbench runs random key lookups through the coordinator on 2 clients
#    for 5 seconds without a failed transaction, probing kv_k on every
#    shard;
#  - finally the rows read through the coordinator are the union of the
#    shards' rows, which is the expected set, and every shard holds only
#    keys it owns.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $SHARDS = 3;
my $ROWS = 3000;       # keys 1..$ROWS, value 'v' || k
my $NEW = 30;          # keys $ROWS + 1 .. $ROWS + $NEW inserted later, value 'new' || k

my @shards = map { new_node("shard$_", dir => 'default', force => 0) } 0 .. $SHARDS - 1;
start_node($_) for @shards;
my $coordinator = new_node('coordinator', dir => 'default', force => 0, preload => 0);
start_node($coordinator);
# the wheel of PostgreSQL 16 ships no postgres_fdw
if (!$coordinator->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'postgres_fdw'"))
{
	$_->stop for (@shards, $coordinator);
	plan skip_all => 'postgres_fdw is not installed';
}

$_->safe_psql('postgres', <<'EOS') for @shards;
CREATE EXTENSION pmhash;
CREATE TABLE kv (k int8 NOT NULL, v text NOT NULL);
CREATE UNIQUE INDEX kv_k ON kv USING pmhash (k);
EOS
$coordinator->safe_psql('postgres', join "\n",
	'CREATE EXTENSION postgres_fdw;',
	'CREATE TABLE kv (k int8 NOT NULL, v text NOT NULL) PARTITION BY HASH (k);',
	map {
		my $shard = $shards[$_];
		"CREATE SERVER shard$_ FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '"
		  . $shard->host . "', port '" . $shard->port . "', dbname 'postgres', batch_size '100');",
		  "CREATE USER MAPPING FOR CURRENT_USER SERVER shard$_;",
		  "CREATE FOREIGN TABLE kv_$_ PARTITION OF kv FOR VALUES WITH (MODULUS $SHARDS, REMAINDER $_)"
		  . " SERVER shard$_ OPTIONS (table_name 'kv');"
	} 0 .. $SHARDS - 1);
$coordinator->safe_psql('postgres',
	"INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, $ROWS) g");
$_->safe_psql('postgres', 'ANALYZE kv') for @shards;
my %offset = map { $_->name => log_offset($_) } ($coordinator, @shards);

# Key => the shard that owns it, by the coordinator's partition bounds.
sub owners
{
	my @keys = @_;
	my $pairs = $coordinator->safe_psql('postgres', qq{
		SELECT string_agg(k || ':' || i, ' ') FROM unnest('{@{[ join ',', @keys ]}}'::int8[]) k,
			generate_series(0, $SHARDS - 1) i
		WHERE satisfies_hash_partition('kv'::regclass, $SHARDS, i, k)});
	return map { split /:/ } split / /, $pairs;
}

# The idx_scan of kv_k on each shard, read once postgres_fdw's connections
# to it have closed (the coordinator's sessions have ended), so that their
# backends have reported their counters.
sub idx_scans
{
	my @scans;
	for my $shard (@shards)
	{
		$shard->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'postgres_fdw'")
		  or die $shard->name . ": postgres_fdw's connections do not close";
		push @scans, $shard->safe_psql('postgres',
			"SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'kv_k'");
	}
	return @scans;
}

# The shards whose idx_scan went up between two readings of idx_scans.
sub probed
{
	my ($before, $after) = @_;
	return join ' ', grep { $after->[$_] > $before->[$_] } 0 .. $SHARDS - 1;
}

# Rows of one shard, or of the coordinator, as "k:v" sorted by k.
sub rows_of
{
	my ($node) = @_;
	return [ split /\n/,
		$node->safe_psql('postgres', "SELECT k || ':' || v FROM kv ORDER BY k") ];
}

is(join(' ', map { $_->safe_psql('postgres', q{
		SELECT a.amname || ' ' || i.indisunique FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE c.relname = 'kv_k'}) } @shards),
	join(' ', ('pmhash true') x $SHARDS), 'kv_k is a unique pmhash index on every shard');
my %owner = owners(1 .. $ROWS + $NEW);
my @count = (0) x $SHARDS;
$count[ $owner{$_} ]++ for 1 .. $ROWS;
is(join(' ', map { scalar @{ rows_of($_) } } @shards), join(' ', @count),
	'each shard holds the rows of the keys it owns: ' . join(' ', @count));

############################################################################
# One key through the coordinator.
############################################################################

my $KEY = 42;
my $plan = $coordinator->safe_psql('postgres',
	"EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv WHERE k = $KEY");
my @scans = $plan =~ /Foreign Scan on public\.(kv_\d+)/g;
is("@scans", "kv_$owner{$KEY}", "k = $KEY: one Foreign Scan, of the partition that owns the key")
  or diag $plan;
like($plan, qr/Remote SQL: SELECT k, v FROM public\.kv WHERE \(\(k = $KEY\)\)$/m,
	"k = $KEY: the WHERE is pushed down to the shard");
my @before = idx_scans();
is($coordinator->safe_psql('postgres', "SELECT k || ':' || v FROM kv WHERE k = $KEY"),
	"$KEY:v$KEY", "k = $KEY through the coordinator returns its row");
my @after = idx_scans();
is(probed(\@before, \@after), $owner{$KEY},
	"k = $KEY: only shard$owner{$KEY}, which owns it, probed its pmhash index");

############################################################################
# k = ANY(ARRAY[...]) over two shards.
############################################################################

# two keys of one shard, one of another, and an absent key of the first;
# the third shard owns none of them
my ($first, $second) = ($owner{1}, (grep { $_ != $owner{1} } 0 .. $SHARDS - 1)[0]);
my @pair = sort ($first, $second);
my @of_first = grep { $owner{$_} == $first } 1 .. $ROWS + $NEW;
my @of_second = grep { $owner{$_} == $second } 1 .. $ROWS;
my $absent = (grep { $_ > $ROWS } @of_first)[0];
my @keys = (@of_first[ 0, 1 ], $of_second[0], $absent);
my $any = "k = ANY(ARRAY[@{[ join ', ', @keys ]}]::int8[])";
$plan = $coordinator->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv WHERE $any");
@scans = $plan =~ /Foreign Scan on public\.(kv_\d+)/g;
is(join(' ', sort @scans), join(' ', map { "kv_$_" } @pair),
	"$any: Foreign Scans of the two partitions that own the keys, only")
  or diag $plan;
my @remote = $plan =~ /Remote SQL: SELECT k, v FROM public\.kv WHERE \(\(k = ANY \('\{([\d,]+)\}'::bigint\[\]\)\)\)$/mg;
is("@remote", join(' ', (join(',', @keys)) x 2), "$any: each shard gets the array");
@before = idx_scans();
is($coordinator->safe_psql('postgres', "SELECT string_agg(k || ':' || v, ' ' ORDER BY k) FROM kv WHERE $any"),
	join(' ', map { "$_:v$_" } sort { $a <=> $b } @keys[ 0 .. 2 ]),
	"$any returns the rows of the keys that exist");
@after = idx_scans();
is(probed(\@before, \@after), "@pair",
	"$any: the two shards that own keys probed their pmhash index, the third did not");

############################################################################
# Inserts through the coordinator.
############################################################################

$coordinator->safe_psql('postgres',
	"INSERT INTO kv SELECT g, 'new' || g FROM generate_series($ROWS + 1, $ROWS + $NEW) g");
for my $i (0 .. $SHARDS - 1)
{
	my @new = grep { /^(\d+):/ && $1 > $ROWS } @{ rows_of($shards[$i]) };
	is("@new", join(' ', map { "$_:new$_" } grep { $owner{$_} == $i } $ROWS + 1 .. $ROWS + $NEW),
		"shard$i got the inserted rows whose keys it owns");
}

my $dup = $ROWS + 1;
my ($rc, $out, $err) = $coordinator->psql('postgres',
	"\\set VERBOSITY verbose\nINSERT INTO kv VALUES ($dup, 'dup')");
like($err, qr/ERROR:  23505: duplicate key value violates unique constraint "kv_k"\nDETAIL:  Key \(k\)=\($dup\) already exists\.\nCONTEXT:  remote SQL command: INSERT INTO public\.kv/,
	'a duplicate key inserted through the coordinator fails with 23505 from the shard\'s pmhash index');
is($shards[ $owner{$dup} ]->safe_psql('postgres', "SELECT string_agg(v, ' ') FROM kv WHERE k = $dup"),
	"new$dup", 'the shard keeps its one row of that key');

is($coordinator->safe_psql('postgres', join "\n",
		"INSERT INTO kv VALUES ($dup, 'dup') ON CONFLICT DO NOTHING RETURNING k;",
		"INSERT INTO kv VALUES (-1, 'ins') ON CONFLICT DO NOTHING RETURNING k;",
		'DELETE FROM kv WHERE k = -1;'),
	'-1', 'ON CONFLICT DO NOTHING without a target: the shard skips the duplicate, inserts a new key');
($rc, $out, $err) = $coordinator->psql('postgres',
	"\\set VERBOSITY verbose\nINSERT INTO kv VALUES ($dup, 'dup') ON CONFLICT (k) DO NOTHING");
like($err, qr/ERROR:  42P10: there is no unique or exclusion constraint matching the ON CONFLICT specification/,
	'ON CONFLICT (k) through the coordinator is refused: foreign tables have no unique index');

%owner = (%owner, owners($ROWS + $NEW + 1 .. $ROWS + $NEW + 10));
my $moved = (grep { $owner{$_} != $owner{$KEY} } $ROWS + $NEW + 1 .. $ROWS + $NEW + 10)[0];
is($coordinator->safe_psql('postgres', join "\n",
		'BEGIN;',
		"UPDATE kv SET k = $moved WHERE k = $KEY;",
		"SELECT count(*) FROM kv WHERE k = $moved;",
		"SELECT tableoid::regclass FROM kv WHERE k + 0 = $moved;",
		'ROLLBACK;'),
	"0\nkv_$owner{$KEY}",
	'an UPDATE of the key leaves the row on its shard, out of reach of lookups of the new key');

############################################################################
# pgbench lookups through the coordinator.
############################################################################

my $script = $coordinator->basedir . '/fdw_select.sql';
append_to_file($script, "\\set k random(1, $ROWS + $NEW)\nSELECT v FROM kv WHERE k = :k;\n");
@before = idx_scans();
my ($bench_rc, $bench_out) = finish_pgbench(
	start_pgbench($coordinator, 'postgres', clients => 2, seconds => 5, scripts => [$script]));
is($bench_rc, 0, 'pgbench select-only through the coordinator succeeds') or diag $bench_out;
like($bench_out, qr/^number of failed transactions: 0 /m, 'pgbench: no failed transaction');
my ($done) = $bench_out =~ /^number of transactions actually processed: (\d+)/m;
cmp_ok($done // 0, '>', 0, 'pgbench: ' . ($done // 0) . ' lookups');
@after = idx_scans();
is(probed(\@before, \@after), join(' ', 0 .. $SHARDS - 1),
	'pgbench: every shard answered with its pmhash index');

############################################################################
# All rows.
############################################################################

my @expected = map { "$_:v$_" } 1 .. $ROWS;
push @expected, map { "$_:new$_" } $ROWS + 1 .. $ROWS + $NEW;
my @union;
for my $i (0 .. $SHARDS - 1)
{
	my @rows = @{ rows_of($shards[$i]) };
	is(join(' ', grep { $owner{ (split /:/)[0] } != $i } @rows), '',
		"shard$i holds only keys it owns (" . scalar(@rows) . ' rows)');
	push @union, @rows;
}
@union = sort { (split /:/, $a)[0] <=> (split /:/, $b)[0] } @union;
my $through = rows_of($coordinator);
is_deeply($through, \@union, 'the rows through the coordinator are the union of the shards');
is_deeply($through, \@expected, 'which are the expected ' . scalar(@expected) . ' rows');

check_log($coordinator, $offset{coordinator}, 'coordinator',
	qr/duplicate key value violates unique constraint "kv_k"|no unique or exclusion constraint matching the ON CONFLICT/);
check_log($_, $offset{ $_->name }, $_->name,
	qr/duplicate key value violates unique constraint "kv_k"/) for @shards;

$_->stop for ($coordinator, @shards);
done_testing();
