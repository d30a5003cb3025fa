# Logical replication through unique pmhash indexes used as replica
# identities, on both persistence paths.
#
# A publisher (index files on /dev/shm, the pmem path) publishes three tables
# whose replica identities are unique pmhash indexes: lr (k int8, t text, v)
# on k, lr_text (t text, v) on t, and lr_mc (a int8, b text, v) on (a, b).  Two subscribers, one on each path
# (sub_pmem: /dev/shm with PMEM_IS_PMEM_FORCE=1; sub_msync: the default
# directory inside its data directory, msync), have the same tables with the
# same unique pmhash indexes as their replica identities, so their apply
# workers find the rows of UPDATE and DELETE through pmhash (PostgreSQL 15
# looks up the equality under operator number 3, which pmhash uses since
# 0.2).
#
# The tables hold pairs of keys that share their 32-bit hash code (found by
# grouping hashint8 and hashtext; lr_mc's pairs are (a, 'pair') for the
# int8 pairs), the first of each pair inserted first.
# The apply worker of PostgreSQL 15 takes the first row an index scan
# returns without rechecking it; pmhash must return only rows whose key is
# equal, or the second key's UPDATE or DELETE would land on the first key's
# row.  Updates and deletes of each pair's second key are published, then
# pgbench runs a mixed workload of updates, deletes, upserts and key
# changes on 2 clients.  After the subscribers caught up:
#  - each subscriber's tables equal the publisher's, row for row;
#  - the subscribers' apply workers used the pmhash indexes (idx_scan);
#  - pmhash_verify passes on every subscriber index, and index and bitmap
#    scans of every key equal seqscans (check_indexes);
#  - no server log shows an error or a crash.
# On PostgreSQL 17, which cannot use them, such replica identities are
# refused instead.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PmhashRecovery;

my $ROWS = 20000;            # workload keys 1..$ROWS
my $PAIR_RANGE = 400000;     # keys searched for shared hash codes

my $publisher = new_node('publisher', dir => 'shm', init => { allows_streaming => 'logical' });
start_node($publisher);

# PostgreSQL 17's apply worker cannot look rows up through a pmhash index
# (it stops with "missing operator 0"), so there pmhash refuses it as a
# replica identity (src/pmgates.c): check that, and stop.
if (int($publisher->safe_psql('postgres', 'SHOW server_version_num') / 10000) == 17)
{
	my ($rc, $out, $err) = $publisher->psql('postgres',
		'CREATE EXTENSION pmhash; CREATE TABLE lr (k int8 NOT NULL); '
		  . 'CREATE UNIQUE INDEX lr_k ON lr USING pmhash (k); '
		  . 'ALTER TABLE lr REPLICA IDENTITY USING INDEX lr_k',
		on_error_stop => 1);
	like($err, qr/pmhash index "lr_k" cannot be a replica identity on PostgreSQL 17/,
		'PostgreSQL 17 refuses a pmhash replica identity');
	is($publisher->safe_psql('postgres', "SELECT relreplident FROM pg_class WHERE relname = 'lr'"),
		'd', 'the table keeps its default replica identity');
	done_testing();
	exit 0;
}
my @subscribers = (
	new_node('sub_pmem', dir => 'shm', force => 1),
	new_node('sub_msync', dir => 'default', force => 0));
start_node($_) for @subscribers;

my $schema = <<'EOS';
CREATE EXTENSION pmhash;
CREATE TABLE lr (id bigserial, k int8 NOT NULL, t text NOT NULL, v int NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX lr_k ON lr USING pmhash (k);
ALTER TABLE lr REPLICA IDENTITY USING INDEX lr_k;
CREATE TABLE lr_text (id bigserial, t text NOT NULL, v int NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX lr_text_t ON lr_text USING pmhash (t);
ALTER TABLE lr_text REPLICA IDENTITY USING INDEX lr_text_t;
CREATE TABLE lr_mc (id bigserial, a int8 NOT NULL, b text NOT NULL, v int NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX lr_mc_ab ON lr_mc USING pmhash (a, b);
ALTER TABLE lr_mc REPLICA IDENTITY USING INDEX lr_mc_ab;
EOS
$_->safe_psql('postgres', $schema) for ($publisher, @subscribers);

# Pairs of keys with one hash code, outside the workload's range.
my $int_pairs = $publisher->safe_psql('postgres', qq{
	SELECT string_agg(p[1] || ',' || p[2], ' ') FROM (
	  SELECT (array_agg(g ORDER BY g))[1:2] AS p
	  FROM generate_series($ROWS + 1, $PAIR_RANGE) g
	  GROUP BY hashint8(g) HAVING count(*) > 1) s});
my $text_pairs = $publisher->safe_psql('postgres', qq{
	SELECT string_agg(p[1] || ',' || p[2], ' ') FROM (
	  SELECT (array_agg('c' || g ORDER BY g))[1:2] AS p
	  FROM generate_series(1, $PAIR_RANGE) g
	  GROUP BY hashtext('c' || g) HAVING count(*) > 1) s});
my @int_pairs = map { [ split /,/ ] } split / /, $int_pairs;
my @text_pairs = map { [ split /,/ ] } split / /, $text_pairs;
cmp_ok(scalar(@int_pairs), '>=', 4, 'int8 keys sharing a hash code: ' . scalar(@int_pairs) . ' pairs');
cmp_ok(scalar(@text_pairs), '>=', 4, 'text keys sharing a hash code: ' . scalar(@text_pairs) . ' pairs');

# The rows: the workload's, then each pair's first key, then its second.
$publisher->safe_psql('postgres', join "\n",
	"INSERT INTO lr (k, t) SELECT g, md5(g::text) FROM generate_series(1, $ROWS) g;",
	"INSERT INTO lr_text (t) SELECT md5(g::text) FROM generate_series(1, $ROWS) g;",
	"INSERT INTO lr_mc (a, b) SELECT g % 97, md5(g::text) FROM generate_series(1, $ROWS) g;",
	(map { "INSERT INTO lr_mc (a, b) VALUES ($_->[0], 'pair');" } @int_pairs),
	(map { "INSERT INTO lr_mc (a, b) VALUES ($_->[1], 'pair');" } @int_pairs),
	(map { "INSERT INTO lr (k, t) VALUES ($_->[0], 'first');" } @int_pairs),
	(map { "INSERT INTO lr (k, t) VALUES ($_->[1], 'second');" } @int_pairs),
	(map { "INSERT INTO lr_text (t) VALUES ('$_->[0]');" } @text_pairs),
	(map { "INSERT INTO lr_text (t) VALUES ('$_->[1]');" } @text_pairs));

$publisher->safe_psql('postgres', 'CREATE PUBLICATION pub FOR TABLE lr, lr_text, lr_mc');
(my $connstr = $publisher->connstr('postgres')) =~ s/'/''/g;
for my $sub (@subscribers)
{
	my $name = $sub->name;
	$sub->safe_psql('postgres', "CREATE SUBSCRIPTION $name CONNECTION '$connstr' PUBLICATION pub");
}
$publisher->wait_for_catchup($_->name) for @subscribers;
for my $sub (@subscribers)
{
	ok($sub->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')"),
		$sub->name . ': initial copy done');
}
my %offset = map { $_->name => log_offset($_) } ($publisher, @subscribers);

# Each pair's second key: updated in one half of the pairs, deleted in the
# other (the first key's row must stay as it is).
my @changes;
for my $i (0 .. $#int_pairs)
{
	my $k = $int_pairs[$i][1];
	push @changes, $i % 2
	  ? "DELETE FROM lr WHERE k = $k;"
	  : "UPDATE lr SET v = v + 7, t = 'second, updated' WHERE k = $k;";
	push @changes, $i % 2
	  ? "DELETE FROM lr_mc WHERE a = $k AND b = 'pair';"
	  : "UPDATE lr_mc SET v = v + 7 WHERE a = $k AND b = 'pair';";
}
for my $i (0 .. $#text_pairs)
{
	my $t = $text_pairs[$i][1];
	push @changes, $i % 2
	  ? "DELETE FROM lr_text WHERE t = '$t';"
	  : "UPDATE lr_text SET v = v + 7 WHERE t = '$t';";
}
$publisher->safe_psql('postgres', join "\n", @changes);

# The mixed workload: updates, deletes, upserts and key changes (to -k,
# after removing an older -k) of keys 1..$ROWS.
my $script = $publisher->basedir . '/lr_workload.sql';
PostgreSQL::Test::Utils::append_to_file($script, <<"EOS");
\\set k random(1, $ROWS)
\\set r random(1, 10)
\\if :r <= 3
UPDATE lr SET v = v + 1 WHERE k = :k;
UPDATE lr_text SET v = v + 1 WHERE t = md5(:k::text);
UPDATE lr_mc SET v = v + 1 WHERE a = :k % 97 AND b = md5(:k::text);
\\elif :r <= 5
DELETE FROM lr WHERE k = :k;
DELETE FROM lr_text WHERE t = md5(:k::text);
DELETE FROM lr_mc WHERE a = :k % 97 AND b = md5(:k::text);
\\elif :r <= 8
INSERT INTO lr (k, t) VALUES (:k, md5(:k::text)) ON CONFLICT (k) DO UPDATE SET v = lr.v + 100;
INSERT INTO lr_text (t) VALUES (md5(:k::text)) ON CONFLICT (t) DO UPDATE SET v = lr_text.v + 100;
INSERT INTO lr_mc (a, b) VALUES (:k % 97, md5(:k::text)) ON CONFLICT (a, b) DO UPDATE SET v = lr_mc.v + 100;
\\else
BEGIN;
DELETE FROM lr WHERE k = -:k;
UPDATE lr SET k = -k WHERE k = :k;
COMMIT;
\\endif
EOS
my $run = start_pgbench($publisher, 'postgres', clients => 2, seconds => 8, scripts => [$script]);
my ($rc, $out) = finish_pgbench($run);
is($rc, 0, 'pgbench workload on the publisher succeeded') or diag $out;
$publisher->wait_for_catchup($_->name) for @subscribers;

my $rows_sql = q{
	SELECT (SELECT count(*) FROM lr) || ' ' || (SELECT count(*) FROM lr_text) || ' '
	  || (SELECT md5(string_agg(format('%s|%s|%s|%s', id, k, t, v), ',' ORDER BY k)) FROM lr) || ' '
	  || (SELECT md5(string_agg(format('%s|%s|%s', id, t, v), ',' ORDER BY t)) FROM lr_text) || ' '
	  || (SELECT md5(string_agg(format('%s|%s|%s|%s', id, a, b, v), ',' ORDER BY a, b)) FROM lr_mc)};
my $pairs_sql = q{
	SELECT string_agg(format('%s|%s|%s', k, t, v), ',' ORDER BY k) FROM lr WHERE k > } . $ROWS . q{
	  UNION ALL SELECT string_agg(format('%s|%s|%s', a, b, v), ',' ORDER BY a) FROM lr_mc WHERE b = 'pair'};
my $expected = $publisher->safe_psql('postgres', $rows_sql);
my $expected_pairs = $publisher->safe_psql('postgres', $pairs_sql);
for my $sub (@subscribers)
{
	my $name = $sub->name;
	is($sub->safe_psql('postgres', $pairs_sql), $expected_pairs,
		"$name: the rows of keys that share a hash code equal the publisher's");
	is($sub->safe_psql('postgres', $rows_sql), $expected,
		"$name: both tables equal the publisher's, row for row");
	my $scans = $sub->safe_psql('postgres', q{
		SELECT string_agg(indexrelname || '=' || (idx_scan > 0), ' ' ORDER BY indexrelname)
		FROM pg_stat_user_indexes WHERE indexrelname IN ('lr_k', 'lr_text_t', 'lr_mc_ab')});
	is($scans, 'lr_k=true lr_mc_ab=true lr_text_t=true',
		"$name: the apply worker probed the three pmhash indexes");
	$sub->safe_psql('postgres', "$VACUUM lr, lr_text, lr_mc");
	check_verify($sub, 'postgres', "$name after replication", 1,
		[ 'lr_k', 'lr', 'k' ], [ 'lr_text_t', 'lr_text', 't' ], [ 'lr_mc_ab', 'lr_mc', 'a' ]);
	check_indexes($sub, 'postgres', "$name after replication",
		[ 'lr_k', 'lr', 'k', '-g - 1000000' ], [ 'lr_text_t', 'lr_text', 't', "'absent' || g" ]);
}
check_log($_, $offset{ $_->name }, 'replication') for ($publisher, @subscribers);

$_->stop for (@subscribers, $publisher);
done_testing();
