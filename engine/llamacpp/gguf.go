//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "gguf.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"
)

// openGGUF reads a GGUF file's metadata and tensor infos (not its tensor
// data) with ggml's own reader, after checking the magic so that a file
// of another kind gets a clear error rather than ggml's log line.
func openGGUF(path string) (*C.struct_gguf_context, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	f.Close() //nolint:errcheck // read only
	if err != nil || string(magic) != "GGUF" {
		return nil, fmt.Errorf("%s is not a GGUF file: it does not start with \"GGUF\"", filepath.Base(path))
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	ctx := C.gguf_init_from_file(cpath, C.struct_gguf_init_params{no_alloc: true})
	if ctx == nil {
		return nil, fmt.Errorf("%s: reading the GGUF metadata failed (malformed or truncated; ggml's log says where)", filepath.Base(path))
	}
	return ctx, nil
}

// GGUFString returns the string value of key in a GGUF file's metadata,
// read with ggml's GGUF reader without loading the model; ok is false when
// the file has no string under key.
func GGUFString(path, key string) (value string, ok bool, err error) {
	ctx, err := openGGUF(path)
	if err != nil {
		return "", false, err
	}
	defer C.gguf_free(ctx)
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	id := C.gguf_find_key(ctx, ckey)
	if id < 0 || C.gguf_get_kv_type(ctx, id) != C.GGUF_TYPE_STRING {
		return "", false, nil
	}
	return C.GoString(C.gguf_get_val_str(ctx, id)), true, nil
}

// GGUFMetadataOnly returns a GGUF file holding every metadata key and
// value of the file at path and no tensors (as llama.cpp's
// ggml-vocab-*.gguf files are: loadable with ModelParams.VocabOnly), with
// the string values in set replacing or adding keys. ggml's GGUF code
// reads and writes it.
func GGUFMetadataOnly(path string, set map[string]string) ([]byte, error) {
	src, err := openGGUF(path)
	if err != nil {
		return nil, err
	}
	defer C.gguf_free(src)
	dst := C.gguf_init_empty()
	if dst == nil {
		return nil, errors.New("gguf_init_empty failed")
	}
	defer C.gguf_free(dst)
	C.gguf_set_kv(dst, src)
	for k, v := range set {
		ck, cv := C.CString(k), C.CString(v)
		C.gguf_set_val_str(dst, ck, cv)
		C.free(unsafe.Pointer(ck))
		C.free(unsafe.Pointer(cv))
	}
	n := C.gguf_get_meta_size(dst)
	out := make([]byte, int(n))
	if n > 0 {
		C.gguf_get_meta_data(dst, unsafe.Pointer(&out[0]))
	}
	return out, nil
}
