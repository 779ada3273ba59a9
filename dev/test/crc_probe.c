/*
 * CRC-32 of llmc/utils.h (folded with PCLMULQDQ on x86-64 where the CPU has it, ARMv8's CRC32
 * instructions in an aarch64 build for a CPU with them, slicing-by-8
 * otherwise) for dev/test/test_checkpoints.sh to compare with Python's zlib.crc32: one line
 * "<offset> <length> <crc>" per slice of a pseudo-random buffer, every length 0-300 at offsets 0-3
 * (every tail and alignment around the 64- and 16-byte folds), then large lengths fed in uneven
 * pieces (a running CRC, as the checkpoint writer feeds it). The buffer is written to <file>.
 *
 *   ./crc_probe <file>
 */
#include "../../llmc/utils.h"

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s <file>\n", argv[0]); return 2; }
    const size_t size = (size_t)3 << 20;
    unsigned char *buf = (unsigned char *)mallocCheck(size);
    uint32_t x = 12345;
    for (size_t i = 0; i < size; i++) { x = x * 1103515245u + 12345u; buf[i] = (unsigned char)(x >> 16); }
    FILE *fp = fopenCheck(argv[1], "wb");
    fwriteCheck(buf, 1, size, fp);
    fcloseCheck(fp);
    for (size_t off = 0; off < 4; off++) {
        for (size_t len = 0; len <= 300; len++) { printf("%zu %zu %u\n", off, len, crc32_update(0, buf + off, len)); }
    }
    const size_t big[] = {4096, 65536 + 7, size - 5};
    for (int i = 0; i < 3; i++) {
        uint32_t crc = 0;
        for (size_t done = 0, piece = 1; done < big[i]; done += piece, piece = piece * 3 + 1) {
            if (piece > big[i] - done) { piece = big[i] - done; }
            crc = crc32_update(crc, buf + 5 + done, piece);
        }
        printf("5 %zu %u\n", big[i], crc);
    }
    free(buf);
    return 0;
}
