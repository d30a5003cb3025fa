# Tests of damaged pmhash index files, seen from outside the server: a
# missing file, a damaged file header, damaged segments in the middle of the
# file, a file copied from another index or from another build of the same
# index, a symbolic link in place of the file, and a file truncated under a
# live session.  Each must give an error
# naming the index (or its file) with a REINDEX hint, never a crash, and
# REINDEX must repair the index.  The damage matrix of 006_damage does the
# same to every part of a file with random damage.
# Every error is checked by SQLSTATE and message, every answer of an index
# is compared with a sequential scan, and the server must never crash.
use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery qw(pmhash_dir);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

############################################################################
# Helpers
############################################################################

# Stop the server, change an index's file with $mutate->($path), start again.
sub change_file_offline
{
	my ($node, $db, $index, $mutate) = @_;
	my $path = index_path($node, $db, $index);
	$node->stop;
	$mutate->($path);
	$node->start;
	return $path;
}

############################################################################
# The node, with its files on /dev/shm, and the damaged index t_k.
############################################################################

my $node = start_new_node('main', dir => 'shm');
my $dir = pmhash_dir($node);
make_table($node, 'postgres', 't', 20000, 1000);
make_table($node, 'postgres', 'small', 300, 30);
compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'fresh index');

############################################################################
# 1. A missing file: errors naming the file with a REINDEX hint, no crash.
############################################################################

{
	my $path = change_file_offline($node, 'postgres', 't_k', sub { unlink $_[0] or die $! });
	my $mark = mark($node);
	my $missing = {
		state => '58P01',
		msg => qr/could not open file "\Q$path\E" of pmhash index "t_k": No such file or directory/,
		hint => reindex_hint('t_k')
	};
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		$missing, 'index scan with a missing file');
	expect_error($node, 'postgres', 'INSERT INTO t VALUES (30001, 7)',
		$missing, 'INSERT with a missing file');
	is($node->safe_psql('postgres', "$FORCE_SEQ SELECT count(*) FROM t WHERE id > 20000"),
		'0', 'the failed INSERT added no row');
	ok(!-e $path, 'no file was created behind the index\'s back');
	check_alive($node, $mark, 'missing file');
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'missing file');
}

############################################################################
# 2. A damaged file header.
############################################################################

for my $case (
	[
		'magic overwritten', sub { write_bytes($_[0], 0, 'NOTPMHSH') },
		qr/file header has a wrong magic number/
	],
	[
		'identity byte changed', sub { change_byte($_[0], 24, sub { $_[0] ^ 0x01 }) },
		qr/file header checksum mismatch/
	],
	[
		'format version of an older build (22-slot buckets)',
		sub { write_bytes($_[0], 8, pack('V', 1)) },
		qr/file format version is not supported/
	])
{
	my ($what, $mutate, $detail) = @$case;
	my $path = change_file_offline($node, 'postgres', 't_k', $mutate);
	my $mark = mark($node);
	my $want = damaged('t_k', qr/File "\Q$path\E": $detail/);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		$want, "header $what: index scan");
	expect_error($node, 'postgres', 'INSERT INTO t VALUES (30001, 7)', $want,
		"header $what: INSERT");
	expect_error($node, 'postgres', "SELECT pmhash_verify('t_k')", $want,
		"header $what: pmhash_verify");
	check_alive($node, $mark, "header $what");
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, "header $what");
}

############################################################################
# 2b. A file of the previous format version, as an older pmhash wrote it
#     (here: this file's header relabeled, with its checksum made right):
#     the first use rebuilds the index from its table, says so, and then
#     answers as a sequential scan; the new file has the current version.
############################################################################

{
	my $path = change_file_offline(
		$node, 'postgres', 't_k',
		sub {
			my $head = read_bytes($_[0], 0, 64);
			my $version = unpack 'V', substr($head, 8, 4);
			substr($head, 8, 4) = pack('V', $version - 1);
			write_bytes($_[0], 0, $head . pack('V', crc32c($head)));
		});
	my $mark = mark($node);
	my ($rc, $out, $err) = run_sql($node, 'postgres',
		"$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7");
	is($rc, 0, 'older format: the first index scan succeeds');
	like($err, qr/NOTICE:  (?:00000: )?rebuilding pmhash index "t_k" from table "t"/,
		'older format: the first use says it rebuilds the index');
	like($err, qr/DETAIL:  Its file has format version (\d+), of an older pmhash; this one writes version (\d+)\./,
		'older format: and why');
	is($out, $node->safe_psql('postgres', "$FORCE_SEQ SELECT count(*) FROM t WHERE k = 7"),
		'older format: the rebuilt index answers as a seqscan');
	is(unpack('V', read_bytes($path, 8, 4)), unpack('V', read_bytes(index_path($node, 'postgres', 'small_k'), 8, 4)),
		'older format: the new file has the current format version');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'older format rebuilt');
	is($node->safe_psql('postgres', "SELECT pmhash_verify('t_k')"), '20000',
		'older format: pmhash_verify counts every row once');
	check_alive($node, $mark, 'older format');
}

############################################################################
# 3. Damaged segments in the middle of the file.
############################################################################

make_table($node, 'postgres', 'dup', 6000, 20);
$node->safe_psql('postgres',
	'INSERT INTO dup SELECT i, i FROM generate_series(100, 3000) i');
cmp_ok($node->safe_psql('postgres', "SELECT chains FROM pmhash_stats('dup_k')"),
	'>', 0, 'the duplicate-heavy index has posting chains');

# with bucket checksums (data checksums on, 18's initdb default) a damaged
# byte may be reported as a checksum mismatch first: either names the damage
for my $case (
	[
		'segment header byte',
		sub { change_byte($_[0], $_[1]{unit} * $UNIT + 16, sub { $_[0] ^ 0xFF }) },
		qr/shard \d+: segment at unit \d+ is damaged|shard \d+: segment header checksum mismatch/
	],
	[
		'reserved bits of a bucket commit word',
		sub { change_byte($_[0], ($_[1]{unit} + 1) * $UNIT + 3, sub { $_[0] | 0x80 }) },
		qr/shard \d+ bucket 0: (?:reserved commit bits are set|checksum mismatch)/
	],
	[
		'length of a posting chain',
		sub {
			write_bytes($_[0], ($_[1]{unit} + 1 + $_[1]{nbuckets}) * $UNIT + 28,
				pack('v', 0));
		},
		qr/shard \d+: posting block 0 does not start a chain that fits|shard \d+ posting block 0: checksum mismatch/
	],
	[
		'descriptor',
		sub { write_bytes($_[0], $_[1]{desc_entry}, pack('Q<', (1 << 40) - 1 | (7 << 40))) },
		qr/shard \d+: descriptor points outside the file/
	])
{
	my ($what, $mutate, $detail) = @$case;
	change_file_offline($node, 'postgres', 'dup_k',
		sub { $mutate->($_[0], find_segment($_[0], 1)) });
	my $mark = mark($node);
	expect_error($node, 'postgres', "SELECT pmhash_verify('dup_k')",
		damaged('dup_k', $detail), "damaged $what: pmhash_verify");
	compare_with_seqscan($node, 'postgres', 'dup_k', 'dup', 'k', -2, 3002,
		"damaged $what", allow_damaged => 1);
	check_alive($node, $mark, "damaged $what");
	reindex_and_check($node, 'postgres', 'dup_k', 'dup', 'k', -2, 3002, "damaged $what");
}

############################################################################
# 4. A file copied from another index, or from another build of the same
# one, or a symbolic link in its place.
############################################################################

{
	my $other = index_path($node, 'postgres', 'small_k');
	ok(-s $other != -s index_path($node, 'postgres', 't_k'), 'the two files differ in size');
	my $path = change_file_offline($node, 'postgres', 't_k',
		sub { copy($other, $_[0]) or die "copy: $!" });
	my $mark = mark($node);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		damaged('t_k', qr/File "\Q$path\E": The file belongs to another relation/),
		'file of another index');
	compare_with_seqscan($node, 'postgres', 'small_k', 'small', 'k', -1, 31,
		'the index whose file was copied');
	check_alive($node, $mark, 'file of another index');
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'file of another index');
}

{
	# TRUNCATE of a table created in the same transaction rebuilds its
	# indexes in place: same relfilenode, new build.
	my $saved = PostgreSQL::Test::Utils::tempdir() . '/old_build.pmh';
	my $s = start_session($node, 'postgres');
	session_ok($s,
		    'BEGIN; CREATE TABLE gen (id int, k int); '
		  . 'INSERT INTO gen SELECT i, i % 100 FROM generate_series(1, 3000) i; '
		  . 'CREATE INDEX gen_k ON gen USING pmhash (k);', 'first build');
	my $name = session_ok($s, file_sql('gen_k'), 'file name of the first build');
	copy("$dir/$name", $saved) or die "copy: $!";
	session_ok($s,
		    'TRUNCATE gen; INSERT INTO gen SELECT i, i % 50 FROM generate_series(1, 2000) i; '
		  . 'COMMIT;', 'second build');
	$s->quit;
	is($node->safe_psql('postgres', file_sql('gen_k')), $name,
		'the second build kept the relfilenode');
	my $path = change_file_offline($node, 'postgres', 'gen_k',
		sub { copy($saved, $_[0]) or die "copy: $!" });
	my $mark = mark($node);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM gen WHERE k = 7",
		damaged('gen_k', qr/File "\Q$path\E": The file does not belong to this build/),
		'file of an older build');
	check_alive($node, $mark, 'file of an older build');
	reindex_and_check($node, 'postgres', 'gen_k', 'gen', 'k', -1, 51, 'file of an older build');
}

{
	# A symbolic link in place of the file: never followed, even to a
	# genuine pmhash file, and never written through.
	my $other = index_path($node, 'postgres', 'small_k');
	my $before = slurp_file($other);
	my $path = change_file_offline($node, 'postgres', 't_k',
		sub { unlink $_[0] or die "unlink: $!"; symlink($other, $_[0]) or die "symlink: $!" });
	my $mark = mark($node);
	my $link = damaged('t_k', qr/File "\Q$path\E" is not a regular file: pmhash does not follow symbolic links/);
	expect_error($node, 'postgres', "$FORCE_INDEX SELECT count(*) FROM t WHERE k = 7",
		$link, 'symbolic link: index scan');
	expect_error($node, 'postgres', 'INSERT INTO t VALUES (30003, 7)', $link,
		'symbolic link: INSERT');
	ok(slurp_file($other) eq $before, 'symbolic link: the file it points to is unchanged');
	check_alive($node, $mark, 'symbolic link');
	reindex_and_check($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'symbolic link');
	ok(-f $other && !-l $other && slurp_file($other) eq $before,
		'symbolic link: REINDEX removed the link, not its target');
}

############################################################################
# 5. A file truncated under a live session: an ERROR, not a crash.
############################################################################

{
	my $mark = mark($node);
	my $path = index_path($node, 'postgres', 't_k');
	my $s = start_session($node, 'postgres');
	session_ok($s, $FORCE_INDEX, 'force index scans');
	my $count = $node->safe_psql('postgres', "$FORCE_SEQ SELECT count(*) FROM t WHERE k = 7");
	is(session_ok($s, 'SELECT count(*) FROM t WHERE k = 7', 'scan before truncation'),
		$count, 'index scan before truncation');
	truncate($path, 0) or die "truncate: $!";
	my $sigbus = {
		state => 'XX002',
		msg => qr/pmhash index "t_k" could not read its file/,
		hint => reindex_hint('t_k')
	};
	my ($out, $err) = session_sql($s, 'SELECT count(*) FROM t WHERE k = 7');
	check_error_report($err, $sigbus, 'index scan of a truncated file');
	($out, $err) = session_sql($s, 'INSERT INTO t VALUES (30002, 7)');
	check_error_report($err, $sigbus, 'INSERT into a truncated file');
	is(session_ok($s, 'SELECT 1', 'session after the errors'), '1', 'the session survives');
	is(session_ok($s, 'SELECT count(*) FROM t WHERE id > 20000', 'row count'),
		'0', 'the failed INSERT added no row');
	session_ok($s, 'REINDEX INDEX t_k', 'REINDEX in the same session');
	is(session_ok($s, 'SELECT count(*) FROM t WHERE k = 7', 'scan after REINDEX'),
		$count, 'the session finds the rows after REINDEX');
	$s->quit;
	check_alive($node, $mark, 'truncated file');
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -3, 1002, 'truncated file repaired');
}

check_whole_logs($node);

done_testing();
