// mtmd_ids prints what llama-mtmd-cli does not: the token ids of a greedy
// image or audio chat through libmtmd. It takes the prompt already
// formatted (with <__media__> where the image or audio goes), tokenizes it
// with mtmd_tokenize as llama-mtmd-cli does (BOS added, special tokens
// parsed), evaluates the chunks with mtmd_helper_eval_chunks, then takes
// the argmax token n_predict times. The media file is read with
// mtmd_helper_bitmap_init_from_file, as llama-mtmd-cli's --image and
// --audio do (a WAV, MP3 or FLAC file is audio). Output: one line per
// prompt chunk ("text" and its ids, or "image" or "audio", its token
// count and its embeddings' range and count of values that are not
// finite), then "generated" and the ids, then the text of each generated
// token as JSON-ish escaped pieces.
//
// Build against a llama.cpp build tree (ec98e2002), e.g.:
//
//	L=/work/baseline/llama.cpp
//	g++ -O2 -std=c++17 mtmd_ids.cpp -I$L/include -I$L/ggml/include -I$L/tools/mtmd \
//	    -L$L/build/bin -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o mtmd_ids
//	./mtmd_ids stories260K-img.gguf mmproj-tiny.gguf gradient-64.png \
//	    $'<|im_start|>user\n<__media__>Describe<|im_end|>\n<|im_start|>assistant\n' 16
//	./mtmd_ids stories260K-audio.gguf mmproj-tiny-audio.gguf sweep-1s.wav \
//	    $'<|im_start|>user\n<__media__>Describe<|im_end|>\n<|im_start|>assistant\n' 16
//
// (the prompt must keep its last newline, which "$(...)" would strip).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

static void quiet(ggml_log_level, const char *, void *) {}

int main(int argc, char ** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s model.gguf mmproj.gguf image-or-audio prompt n_predict\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, nullptr);
    mtmd_helper_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4096;
    cp.n_batch = 2048;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    llama_context * lctx = llama_init_from_model(model, cp);
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = false;
    mp.n_threads = 1;
    mp.print_timings = false;
    mtmd_context * mctx = mtmd_init_from_file(argv[2], model, mp);
    if (!mctx) return 1;
    mtmd_bitmap * bmp = mtmd_helper_bitmap_init_from_file(mctx, argv[3]);
    if (!bmp) return 1;
    mtmd_input_text text{argv[4], /*add_special*/ true, /*parse_special*/ true};
    mtmd_input_chunks * chunks = mtmd_input_chunks_init();
    const mtmd_bitmap * bitmaps[] = {bmp};
    if (mtmd_tokenize(mctx, chunks, &text, bitmaps, 1) != 0) return 1;
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks, i);
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n;
            const llama_token * t = mtmd_input_chunk_get_tokens_text(c, &n);
            printf("text");
            for (size_t j = 0; j < n; j++) printf(" %d", t[j]);
            printf("\n");
        } else {
            // Encode the image or audio chunk on its own to look at its
            // embeddings.
            const bool audio = mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_AUDIO;
            const size_t n_tok = mtmd_input_chunk_get_n_tokens(c);
            if (mtmd_encode_chunk(mctx, c) != 0) return 1;
            const float * e = mtmd_get_output_embd(mctx);
            const size_t n = n_tok * llama_model_n_embd(model);
            size_t bad = 0;
            float lo = 0, hi = 0;
            double abs_sum = 0;
            for (size_t j = 0; j < n; j++) {
                if (!std::isfinite(e[j])) { bad++; continue; }
                lo = std::min(lo, e[j]);
                hi = std::max(hi, e[j]);
                abs_sum += std::fabs(e[j]);
            }
            printf("%s %zu (embeddings: min %.4f max %.4f mean|x| %.4f, %zu not finite)\n", audio ? "audio" : "image", n_tok, lo, hi, abs_sum / n, bad);
        }
    }
    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, cp.n_batch, true, &n_past) != 0) return 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> out;
    std::string pieces;
    for (int i = 0; i < atoi(argv[5]); i++) {
        const float * logits = llama_get_logits_ith(lctx, -1);
        llama_token best = 0;
        for (llama_token t = 1; t < n_vocab; t++) {
            if (logits[t] > logits[best]) best = t;
        }
        if (llama_vocab_is_eog(vocab, best)) break;
        out.push_back(best);
        char buf[256];
        int n = llama_token_to_piece(vocab, best, buf, sizeof buf, 0, false);
        pieces.append(buf, n > 0 ? n : 0);
        llama_batch b = llama_batch_get_one(&out.back(), 1);
        if (llama_decode(lctx, b) != 0) return 1;
    }
    printf("generated");
    for (llama_token t : out) printf(" %d", t);
    printf("\ntext ");
    for (char ch : pieces) {
        if (ch == '\n') printf("\\n");
        else if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else putchar(ch);
    }
    printf("\n");
    mtmd_bitmap_free(bmp);
    mtmd_input_chunks_free(chunks);
    mtmd_free(mctx);
    llama_free(lctx);
    llama_model_free(model);
    return 0;
}
