/*-------------------------------------------------------------------------
 *
 * pmh_codec.c
 *	  Compact encoding of entry lists for WAL records.
 *
 * A shard's content (REBUILD) is sorted by hash, so hashes are written as
 * varint deltas; a deletion (DELETE) needs only TIDs, sorted, so block
 * numbers are varint deltas.  Offsets are varints carrying the unverified
 * flag in their low bit.  Typical entries take 4 to 6 bytes instead of 12.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_codec.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>

#include "pmh_core.h"

/* Append a varint; returns the new end. */
static uint8_t *
put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80)
	{
		*p++ = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t) v;
	return p;
}

/* Read a varint; NULL if it runs past end. */
static const uint8_t *
get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t	result = 0;
	int			shift = 0;

	while (p < end && shift < 64)
	{
		uint8_t		b = *p++;

		result |= (uint64_t) (b & 0x7F) << shift;
		if (!(b & 0x80))
		{
			*v = result;
			return p;
		}
		shift += 7;
	}
	return NULL;
}

/* Bytes an encoding of count entries may take at most. */
size_t
pmh_encoded_max(uint64_t count)
{
	return count * 20 + 16;
}

/*
 * Encode entries sorted by hash (with_hash) or by TID (without): returns
 * the number of bytes written to out, which must hold pmh_encoded_max().
 */
size_t
pmh_encode_entries(const PmhEntry *entries, uint64_t count, int with_hash, uint8_t *out)
{
	uint8_t    *p = out;
	uint32_t	prev_hash = 0;
	uint32_t	prev_block = 0;

	for (uint64_t i = 0; i < count; i++)
	{
		uint32_t	block = pmh_tid_block(entries[i].tid);
		uint64_t	offset = ((uint64_t) entries[i].tid.offset << 1) |
			((entries[i].flags & PMH_ENTRY_UNVERIFIED) != 0);

		if (with_hash)
		{
			p = put_varint(p, (uint32_t) (entries[i].hash - prev_hash));
			prev_hash = entries[i].hash;
			p = put_varint(p, block);
		}
		else
		{
			p = put_varint(p, (uint32_t) (block - prev_block));
			prev_block = block;
		}
		p = put_varint(p, offset);
	}
	return (size_t) (p - out);
}

/*
 * Decode count entries; hashes are 0 for an encoding without them.
 * Returns 0 on success, -1 if the data is malformed.
 */
int
pmh_decode_entries(const uint8_t *data, size_t len, uint64_t count, int with_hash,
				   PmhEntry *out)
{
	const uint8_t *p = data;
	const uint8_t *end = data + len;
	uint32_t	hash = 0;
	uint32_t	block = 0;

	for (uint64_t i = 0; i < count; i++)
	{
		uint64_t	a;
		uint64_t	b;
		uint64_t	offset;

		if ((p = get_varint(p, end, &a)) == NULL)
			return -1;
		if (with_hash)
		{
			hash += (uint32_t) a;
			if ((p = get_varint(p, end, &b)) == NULL)
				return -1;
			block = (uint32_t) b;
		}
		else
			block += (uint32_t) a;
		if ((p = get_varint(p, end, &offset)) == NULL || (offset >> 1) > UINT16_MAX)
			return -1;
		out[i].hash = hash;
		out[i].tid = pmh_tid_make(block, (uint16_t) (offset >> 1));
		out[i].flags = (offset & 1) ? PMH_ENTRY_UNVERIFIED : 0;
	}
	return p == end ? 0 : -1;
}
