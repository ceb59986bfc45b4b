/* export_driver.c — compiled by tests/e2e/quantize.sh together with a model.c written by
 * `nnbench export-model --int8`: reads the test vectors nnbench wrote (inputs, its int8
 * class and logits) and counts where the exported C model differs. Exit 0 when none does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nnb_logits(const float *x, float *out);
int nnb_predict(const float *x);

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: export_driver VECTORS\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    int32_t h[3];
    if (!f || fread(h, sizeof h, 1, f) != 1) { fprintf(stderr, "cannot read %s\n", argv[1]); return 2; }
    float *x = malloc(sizeof(float) * (size_t)h[1]), *want = malloc(sizeof(float) * (size_t)h[2]);
    float *got = malloc(sizeof(float) * (size_t)h[2]);
    long class_diff = 0, logit_diff = 0;
    for (int i = 0; i < h[0]; i++) {
        int32_t cls;
        if (fread(x, sizeof(float), (size_t)h[1], f) != (size_t)h[1] || fread(&cls, sizeof cls, 1, f) != 1 ||
            fread(want, sizeof(float), (size_t)h[2], f) != (size_t)h[2]) { fprintf(stderr, "short file\n"); return 2; }
        nnb_logits(x, got);
        if (nnb_predict(x) != cls) class_diff++;
        if (memcmp(got, want, sizeof(float) * (size_t)h[2])) logit_diff++;
    }
    fclose(f);
    printf("%d samples: %ld predictions and %ld logit vectors differ from nnbench's int8 path\n", h[0], class_diff, logit_diff);
    free(x); free(want); free(got);
    return class_diff || logit_diff ? 1 : 0;
}
