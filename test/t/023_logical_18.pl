# What PostgreSQL 18's logical replication does with pmhash indexes on a
# subscriber, through the access method's strategy translation
# (amtranslatecmptype); skipped before 18.
#
# 1. REPLICA IDENTITY FULL: the publisher logs whole old rows; the
#    subscriber's apply worker picks an index to find them by, which on 18
#    may be any index whose operator classes have an equality (15-17: btree
#    and hash only).  The subscriber's table has a plain pmhash index on
#    its key (with keys that share hash codes) and no other: updates and
#    deletes replicate, the apply worker probed the pmhash index (idx_scan),
#    and the tables equal the publisher's row for row.
# 2. An insert conflict: the subscriber holds a row whose key the publisher
#    then inserts; the apply worker finds it through the subscriber's
#    unique pmhash index (18 prepares it for that as for ON CONFLICT) and
#    stops with the insert_exists conflict naming the index, retrying,
#    until the local row goes; then the tables agree.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PmhashRecovery;

my $publisher = new_node('publisher', dir => 'shm', init => { allows_streaming => 'logical' });
start_node($publisher);
if ($publisher->safe_psql('postgres', 'SHOW server_version_num') < 180000)
{
	$publisher->stop;
	plan skip_all => 'PostgreSQL 18 or later';
}
my $subscriber = new_node('subscriber', dir => 'default', force => 0,
	conf => "wal_retrieve_retry_interval = 200ms\n");
start_node($subscriber);

$publisher->safe_psql('postgres', <<'EOS');
CREATE EXTENSION pmhash;
CREATE TABLE full_t (id bigserial, k int8, v int NOT NULL DEFAULT 0);
ALTER TABLE full_t REPLICA IDENTITY FULL;
CREATE TABLE uniq_t (id bigserial, k int8 NOT NULL, v text);
CREATE UNIQUE INDEX uniq_t_k ON uniq_t USING pmhash (k);
ALTER TABLE uniq_t REPLICA IDENTITY USING INDEX uniq_t_k;
EOS
$subscriber->safe_psql('postgres', <<'EOS');
CREATE EXTENSION pmhash;
CREATE TABLE full_t (id int8, k int8, v int NOT NULL DEFAULT 0);
CREATE INDEX full_t_k ON full_t USING pmhash (k);
CREATE TABLE uniq_t (id int8, k int8 NOT NULL, v text);
CREATE UNIQUE INDEX uniq_t_k ON uniq_t USING pmhash (k);
ALTER TABLE uniq_t REPLICA IDENTITY USING INDEX uniq_t_k;
EOS

# keys that share their hash code with another, beside plain ones
my $pairs = $publisher->safe_psql('postgres', q{
	SELECT string_agg(p[1] || ',' || p[2], ',') FROM (
	  SELECT (array_agg(g ORDER BY g))[1:2] AS p
	  FROM generate_series(10001, 400000) g
	  GROUP BY hashint8(g) HAVING count(*) > 1 LIMIT 8) s});
my @pair_keys = split /,/, $pairs;
cmp_ok(scalar(@pair_keys), '>=', 8, 'int8 keys sharing a hash code');
$publisher->safe_psql('postgres',
	"INSERT INTO full_t (k) SELECT g % 5000 FROM generate_series(1, 10000) g; "
	  . "INSERT INTO full_t (k) VALUES (" . join('), (', @pair_keys) . "); "
	  . "INSERT INTO uniq_t (k, v) SELECT g, 'p' FROM generate_series(1, 1000) g");
$publisher->safe_psql('postgres', 'CREATE PUBLICATION pub FOR TABLE full_t, uniq_t');
(my $connstr = $publisher->connstr('postgres')) =~ s/'/''/g;
$subscriber->safe_psql('postgres', "CREATE SUBSCRIPTION sub CONNECTION '$connstr' PUBLICATION pub");
$publisher->wait_for_catchup('sub');
ok($subscriber->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')"),
	'initial copy done');

my $rows_sql = q{
	SELECT (SELECT count(*) || ':' || md5(string_agg(id || '|' || k || '|' || v, ',' ORDER BY id)) FROM full_t)
	  || ' ' || (SELECT count(*) || ':' || md5(string_agg(id || '|' || k || '|' || v, ',' ORDER BY k)) FROM uniq_t)};

# 1. REPLICA IDENTITY FULL through the pmhash index
{
	# the second key of each pair changed, the first left alone
	my @changes;
	for my $i (0 .. $#pair_keys / 2)
	{
		my $k = $pair_keys[ 2 * $i + 1 ];
		push @changes, $i % 2 ? "DELETE FROM full_t WHERE k = $k;" : "UPDATE full_t SET v = v + 7 WHERE k = $k;";
	}
	$publisher->safe_psql('postgres', join("\n", @changes,
			'UPDATE full_t SET v = v + 1 WHERE k % 10 = 3;',
			'DELETE FROM full_t WHERE k % 10 = 7;',
			'UPDATE full_t SET k = k + 100000 WHERE k % 10 = 1;'));
	$publisher->wait_for_catchup('sub');
	is($subscriber->safe_psql('postgres', $rows_sql), $publisher->safe_psql('postgres', $rows_sql),
		'REPLICA IDENTITY FULL: the subscriber equals the publisher, row for row');
	cmp_ok($subscriber->safe_psql('postgres',
			"SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'full_t_k'"),
		'>', 0, 'REPLICA IDENTITY FULL: the apply worker found the rows through the pmhash index');
	check_indexes($subscriber, 'postgres', 'REPLICA IDENTITY FULL', [ 'full_t_k', 'full_t', 'k', '-g' ]);
}

# 2. an insert conflict detected through the unique pmhash index
{
	my $offset = log_offset($subscriber);
	$subscriber->safe_psql('postgres', "INSERT INTO uniq_t (id, k, v) VALUES (-1, 5000, 'local')");
	$publisher->safe_psql('postgres', "INSERT INTO uniq_t (k, v) VALUES (5000, 'published')");
	ok($subscriber->wait_for_log(
			qr/conflict detected on relation "public.uniq_t": conflict=insert_exists/, $offset),
		'insert conflict: the apply worker reports insert_exists');
	like(slurp_file($subscriber->logfile, $offset),
		qr/Key already exists in unique index "uniq_t_k"/,
		'insert conflict: the report names the pmhash index');
	is($subscriber->safe_psql('postgres', "SELECT string_agg(v, ',') FROM uniq_t WHERE k = 5000"),
		'local', 'insert conflict: the local row stays, no duplicate');
	$subscriber->safe_psql('postgres', 'DELETE FROM uniq_t WHERE k = 5000');
	$publisher->wait_for_catchup('sub');
	is($subscriber->safe_psql('postgres', $rows_sql), $publisher->safe_psql('postgres', $rows_sql),
		'insert conflict resolved: the subscriber equals the publisher');
	check_indexes($subscriber, 'postgres', 'after the conflict', [ 'uniq_t_k', 'uniq_t', 'k', '-g' ]);
}

check_log($publisher, 0, 'publisher');
check_log($subscriber, 0, 'subscriber',
	qr/duplicate key value violates unique constraint "uniq_t_k"|conflict detected|logical replication worker|background worker "logical replication/);
$subscriber->stop;
$publisher->stop;

done_testing();
