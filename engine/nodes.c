/* nodes.c — the model's node table: a node's zeroed start, appending a node. Apart from model.c so that
 * attention.c (whose eng_seq_* model.c calls) can add its nodes without calling back
 * into model.c. */
#include "internal.h"

#include <string.h>

void eng_node_init(eng_node *n, eng_op_id op, int layer, const int in_shape[3], const int out_shape[3])
{
    memset(n, 0, sizeof *n);
    n->op = op;
    n->layer = layer;
    memcpy(n->in_shape, in_shape, sizeof n->in_shape);
    memcpy(n->out_shape, out_shape, sizeof n->out_shape);
    n->in_size = (size_t)in_shape[0] * in_shape[1] * in_shape[2];
    n->out_size = (size_t)out_shape[0] * out_shape[1] * out_shape[2];
    n->prof_fwd = n->prof_bwd = -1;
}

eng_node *eng_model_add_node(eng_model *m, eng_op_id op, int layer, const int in_shape[3], const int out_shape[3])
{
    eng_node *n = &m->nodes[m->n_nodes++];
    eng_node_init(n, op, layer, in_shape, out_shape);
    return n;
}
