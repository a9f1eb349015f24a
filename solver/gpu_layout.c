/* How the GPU solvers lay data out in memory, in plain C (no CUDA), so that tests check the
 * arithmetic on the host with the CPU kernels.
 *
 * Streaming (lm_cuda.c): chunk k of `chunk` points is one block of ncols arrays, each `chunk`
 * long: the nv columns of x, then y, then the weights when the fit has them. The page-locked
 * host copy is the chunks one after the other; a device buffer holds one chunk in the same
 * layout, so one copy moves a chunk and the kernel reads it with ldx = chunk.
 *
 * Batches (batch_cuda.c): the fits' points one after the other in each array (x columns of
 * `total` points, y, w), fit f owning [off[f], off[f+1]); a fit without weights gets 1.
 */
#include <string.h>

#include "solver.h"

void jf_stream_layout_init(jf_stream_layout *l, size_t n, size_t nv, int weighted, size_t chunk) {
    l->n = n;
    l->nv = nv;
    l->weighted = weighted;
    l->ncols = nv + 1 + (weighted ? 1 : 0);
    l->chunk = chunk;
    l->nchunks = chunk ? (n + chunk - 1) / chunk : 0;
}

size_t jf_stream_chunk_len(const jf_stream_layout *l, size_t k) {
    size_t b = k * l->chunk;
    return l->n - b < l->chunk ? l->n - b : l->chunk;
}

/* Where array c (x's columns, then y, then w) of chunk k comes from in d: its first point. In
 * the chunk buffer it starts c·chunk doubles in. */
static const double *stream_col(const jf_stream_layout *l, const jf_data_view *d, size_t k,
                                size_t c) {
    size_t b = k * l->chunk;
    return c < l->nv ? d->x + c * d->ldx + b : c == l->nv ? d->y + b : d->w + b;
}

void jf_stream_fill(const jf_stream_layout *l, const jf_data_view *d, double *dst) {
    for (size_t k = 0; k < l->nchunks; k++) {
        size_t len = jf_stream_chunk_len(l, k);
        for (size_t c = 0; c < l->ncols; c++)
            memcpy(dst + (k * l->ncols + c) * l->chunk, stream_col(l, d, k, c),
                   len * sizeof(double));
    }
}

size_t jf_stream_pieces(const jf_stream_layout *l, const jf_data_view *d, size_t k, jf_devptr dst,
                        jf_gpu_piece *pc) {
    size_t len = jf_stream_chunk_len(l, k) * sizeof(double);
    for (size_t c = 0; c < l->ncols; c++)
        pc[c] = (jf_gpu_piece){dst + c * l->chunk * sizeof(double), stream_col(l, d, k, c), len, 0};
    return l->ncols;
}

int jf_stream_offsets(const jf_stream_layout *l, int weighted, size_t *y_off, size_t *w_off) {
    *y_off = l->nv * l->chunk;
    *w_off = (l->nv + 1) * l->chunk;
    return weighted && l->weighted;
}

jf_data_view jf_stream_view(const jf_stream_layout *l, const double *chunk_buf, int weighted) {
    size_t yo, wo;
    int has_w = jf_stream_offsets(l, weighted, &yo, &wo);
    jf_data_view v;
    v.x = chunk_buf;
    v.ldx = l->chunk;
    v.y = chunk_buf + yo;
    v.w = has_w ? chunk_buf + wo : NULL;
    return v;
}

void jf_batch_pack_range(const jf_batch_fit *fits, size_t f0, size_t f1, size_t nv, size_t total,
                         double *x, double *y, double *w, const unsigned long long *off) {
    for (size_t f = f0; f < f1; f++) {
        const jf_batch_fit *bf = &fits[f];
        size_t at = (size_t)off[f];
        for (size_t j = 0; j < nv; j++)
            if (x) memcpy(x + j * total + at, bf->x + j * bf->ldx, bf->n * sizeof(double));
        if (y) memcpy(y + at, bf->y, bf->n * sizeof(double));
        for (size_t i = 0; w && i < bf->n; i++) w[at + i] = bf->w ? bf->w[i] : 1.0;
    }
}

size_t jf_batch_offsets(const jf_batch_fit *fits, size_t nfits, unsigned long long *off) {
    size_t at = 0;
    for (size_t f = 0; f < nfits; f++) {
        off[f] = at;
        at += fits[f].n;
    }
    off[nfits] = at;
    return at;
}

size_t jf_batch_pack(const jf_batch_fit *fits, size_t nfits, size_t nv, size_t total, double *x,
                     double *y, double *w, unsigned long long *off) {
    size_t at = jf_batch_offsets(fits, nfits, off);
    jf_batch_pack_range(fits, 0, nfits, nv, total, x, y, w, off);
    return at;
}
