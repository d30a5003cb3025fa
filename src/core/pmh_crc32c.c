/*-------------------------------------------------------------------------
 *
 * pmh_crc32c.c
 *	  CRC-32C (Castagnoli) for file and segment headers.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_crc32c.c
 *
 *-------------------------------------------------------------------------
 */
#include "pmh_core.h"

static uint32_t crc_table[256];
static int	crc_table_ready = 0;

/* Fill the byte-at-a-time table for the reflected polynomial 0x82F63B78. */
static void
crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++)
	{
		uint32_t	c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ UINT32_C(0x82F63B78) : c >> 1;
		crc_table[i] = c;
	}
	__atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

/* CRC-32C of a byte range. */
uint32_t
pmh_crc32c(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t	crc = UINT32_C(0xFFFFFFFF);

	if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
		crc_table_init();
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
	return crc ^ UINT32_C(0xFFFFFFFF);
}
