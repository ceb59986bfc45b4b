/* kinks.h (tests) — which side of every kink a model's last forward was on: max-pool
 * argmaxes and relu masks (a relu's output > 0, exactly when its input is; a relu in place
 * keeps no other record of its input). A central difference whose two sides differ from
 * the base point here crossed a kink, where the loss is not differentiable: the model
 * gradient checks of ops.c and norm.c skip (and count) such a value. */
#ifndef NNBENCH_TESTS_ENGINE_KINKS_H
#define NNBENCH_TESTS_ENGINE_KINKS_H

#include <stdint.h>

#include "../../engine/internal.h"

static inline uint64_t kink_signature(const eng_model *m)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < m->n_nodes; i++) {
        const eng_node *n = &m->nodes[i];
        if (n->op != ENG_OP_MAXPOOL && n->op != ENG_OP_RELU) continue;
        for (size_t k = 0; k < (size_t)m->rows * n->out_size; k++) {
            uint64_t v = n->op == ENG_OP_MAXPOOL ? (uint64_t)n->argmax[k] : (uint64_t)(n->y[k] > 0.0f);
            h = (h ^ v) * 1099511628211ull;
        }
    }
    return h;
}

#endif
