//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Model is a loaded GGUF model. It is safe for concurrent use; Close must
// not race with other calls.
type Model struct {
	mu    sync.RWMutex // write-locked only by Close
	c     *C.struct_llama_model
	vocab *C.struct_llama_vocab
	info  Info

	pieces        [][]byte // token -> text, control tokens empty
	specialPieces [][]byte // token -> text, control tokens rendered
	eog           []bool
	control       []bool
	bos, eos, sep int32
}

// The values ModelParams.SplitMode names ("" is the default).
var splitModes = map[string]C.enum_llama_split_mode{
	"":      C.LLAMA_SPLIT_MODE_LAYER,
	"layer": C.LLAMA_SPLIT_MODE_LAYER,
	"none":  C.LLAMA_SPLIT_MODE_NONE,
	"row":   C.LLAMA_SPLIT_MODE_ROW,
}

// Load loads the GGUF file at path.
func Load(path string, p ModelParams) (*Model, error) {
	ensureInit()
	mp := C.llama_model_default_params()
	mp.n_gpu_layers = C.int32_t(p.GPULayers)
	if p.GPULayers < 0 {
		mp.n_gpu_layers = 999
	}
	mp.main_gpu = C.int32_t(p.MainGPU)
	split, ok := splitModes[p.SplitMode]
	if !ok {
		return nil, fmt.Errorf("load %s: unknown split mode %q (want none, layer or row)", path, p.SplitMode)
	}
	mp.split_mode = split
	mp.use_mmap = C.bool(!p.NoMmap)
	mp.use_mlock = C.bool(p.Mlock)
	mp.vocab_only = C.bool(p.VocabOnly)

	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	cm := C.llama_model_load_from_file(cpath, mp)
	if cm == nil {
		return nil, fmt.Errorf("load %s: llama.cpp could not load the model (see its log)", path)
	}
	m := &Model{c: cm, vocab: C.llama_model_get_vocab(cm)}
	m.readInfo(p.VocabOnly)
	m.readVocab()
	return m, nil
}

// readInfo reads the model's description. A vocabulary-only model has no
// hyperparameters: llama.cpp asserts on reading them (n_head of layer 0),
// so only the vocabulary's part is read.
func (m *Model) readInfo(vocabOnly bool) {
	c := m.c
	m.info = Info{
		Architecture: m.Meta("general.architecture"),
		NVocab:       int(C.llama_vocab_n_tokens(m.vocab)),
		AddBOS:       bool(C.llama_vocab_get_add_bos(m.vocab)),
		AddEOS:       bool(C.llama_vocab_get_add_eos(m.vocab)),
		AddSEP:       bool(C.llama_vocab_get_add_sep(m.vocab)),
	}
	if vocabOnly {
		m.info.Description = "vocabulary of " + m.info.Architecture
		return
	}
	nHead := int(C.llama_model_n_head(c))
	nHeadKV := int(C.llama_model_n_head_kv(c))
	nEmbd := int(C.llama_model_n_embd(c))
	nLayer := int(C.llama_model_n_layer(c))
	kv := 0
	if nHead > 0 {
		kv = 2 * nLayer * nHeadKV * (nEmbd / nHead) * 2
	}
	m.info.Description = m.desc()
	m.info.NCtxTrain = int(C.llama_model_n_ctx_train(c))
	m.info.NEmbd, m.info.NLayer, m.info.NHead, m.info.NHeadKV = nEmbd, nLayer, nHead, nHeadKV
	m.info.Size = uint64(C.llama_model_size(c))
	m.info.NParams = uint64(C.llama_model_n_params(c))
	m.info.KVBytesPerToken = kv
	if t := C.llama_model_chat_template(c, nil); t != nil {
		m.info.ChatTemplate = C.GoString(t)
	}
	rerank := C.CString("rerank")
	defer C.free(unsafe.Pointer(rerank))
	if t := C.llama_model_chat_template(c, rerank); t != nil {
		m.info.RerankTemplate = C.GoString(t)
	}
}

func (m *Model) desc() string {
	buf := make([]byte, 256)
	n := C.llama_model_desc(m.c, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if n < 0 {
		return ""
	}
	return string(buf[:min(int(n), len(buf)-1)])
}

// readVocab caches every token's text so that detokenizing a generated
// token costs no cgo call.
func (m *Model) readVocab() {
	n := m.info.NVocab
	m.pieces = make([][]byte, n)
	m.specialPieces = make([][]byte, n)
	m.eog = make([]bool, n)
	m.control = make([]bool, n)
	buf := make([]byte, 256)
	piece := func(tok int, special bool) []byte {
		for {
			r := C.llama_token_to_piece(m.vocab, C.llama_token(tok), (*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), 0, C.bool(special))
			if r >= 0 {
				return append([]byte(nil), buf[:r]...)
			}
			buf = make([]byte, -int(r))
		}
	}
	for i := range n {
		m.pieces[i] = piece(i, false)
		m.specialPieces[i] = piece(i, true)
		m.eog[i] = bool(C.llama_vocab_is_eog(m.vocab, C.llama_token(i)))
		m.control[i] = bool(C.llama_vocab_is_control(m.vocab, C.llama_token(i)))
	}
	m.bos = int32(C.llama_vocab_bos(m.vocab))
	m.eos = int32(C.llama_vocab_eos(m.vocab))
	m.sep = int32(C.llama_vocab_sep(m.vocab))
}

// Info returns the model's description.
func (m *Model) Info() Info { return m.info }

// Meta returns a GGUF metadata value as a string, or "" if absent.
func (m *Model) Meta(key string) string {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	buf := make([]byte, 512)
	for {
		n := C.llama_model_meta_val_str(m.c, ckey, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
		if n < 0 {
			return ""
		}
		if int(n) < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, int(n)+1)
	}
}

// Tokenize encodes text. It implements tokenizer.Vocab.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return nil, ErrModelClosed
	}
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("tokenize: text of %d bytes is too long", len(text))
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	toks := make([]int32, len(text)+2)
	for {
		var p *C.llama_token
		if len(toks) > 0 {
			p = (*C.llama_token)(unsafe.Pointer(&toks[0]))
		}
		n := C.llama_tokenize(m.vocab, ctext, C.int32_t(len(text)), p, C.int32_t(len(toks)), C.bool(addSpecial), C.bool(parseSpecial))
		if n == C.INT32_MIN {
			return nil, fmt.Errorf("tokenize: text of %d bytes gives too many tokens", len(text))
		}
		if n >= 0 {
			return toks[:n], nil
		}
		toks = make([]int32, -int(n))
	}
}

// Detokenize turns tokens back into text with llama.cpp's own rules
// (llama_detokenize): removeSpecial drops BOS/EOS as the model adds them,
// unparseSpecial renders control tokens as their text.
func (m *Model) Detokenize(toks []int32, removeSpecial, unparseSpecial bool) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return "", ErrModelClosed
	}
	if len(toks) == 0 {
		return "", nil
	}
	buf := make([]byte, 8*len(toks)+16)
	for {
		n := C.llama_detokenize(m.vocab, (*C.llama_token)(unsafe.Pointer(&toks[0])), C.int32_t(len(toks)),
			(*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), C.bool(removeSpecial), C.bool(unparseSpecial))
		if n >= 0 {
			return string(buf[:n]), nil
		}
		if n == C.INT32_MIN {
			return "", fmt.Errorf("detokenize %d tokens: text too long", len(toks))
		}
		buf = make([]byte, -int(n))
	}
}

// Piece returns the text of a token. It implements tokenizer.Vocab.
func (m *Model) Piece(tok int32, special bool) []byte {
	if tok < 0 || int(tok) >= len(m.pieces) {
		return nil
	}
	if special {
		return m.specialPieces[tok]
	}
	return m.pieces[tok]
}

// NumTokens is the vocabulary size.
func (m *Model) NumTokens() int { return m.info.NVocab }

// BOS is the beginning-of-sequence token, -1 if none.
func (m *Model) BOS() int32 { return m.bos }

// FIMTokens returns the fill-in-the-middle prefix, suffix and middle
// tokens, -1 for those the vocabulary lacks.
func (m *Model) FIMTokens() (pre, suf, mid int32) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return -1, -1, -1
	}
	return int32(C.llama_vocab_fim_pre(m.vocab)), int32(C.llama_vocab_fim_suf(m.vocab)), int32(C.llama_vocab_fim_mid(m.vocab))
}

// EOS is the end-of-sequence token, -1 if none.
func (m *Model) EOS() int32 { return m.eos }

// SEP is the sentence separator token, -1 if none.
func (m *Model) SEP() int32 { return m.sep }

// IsEOG reports whether tok ends generation.
func (m *Model) IsEOG(tok int32) bool {
	return tok >= 0 && int(tok) < len(m.eog) && m.eog[tok]
}

// IsControl reports whether tok is a control token.
func (m *Model) IsControl(tok int32) bool {
	return tok >= 0 && int(tok) < len(m.control) && m.control[tok]
}

// Close frees the model. Contexts created from it must be closed first.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		C.llama_model_free(m.c)
		m.c = nil
		m.vocab = nil
	}
	return nil
}
