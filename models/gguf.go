package models

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ggufArchitecture reads general.architecture from a GGUF file's
// metadata, without loading anything: a graph GGUF and an LLM GGUF share
// the format and differ there.
func ggufArchitecture(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // read only
	r := &ggufReader{r: bufio.NewReader(f)}
	if magic := r.bytes(4); r.err == nil && string(magic) != "GGUF" {
		return "", fmt.Errorf("%s is not a GGUF file: it does not start with \"GGUF\"", filepath.Base(path))
	}
	version := r.u32()
	if r.err == nil && (version < 2 || version > 3) {
		return "", fmt.Errorf("%s has GGUF version %d; want 2 or 3", filepath.Base(path), version)
	}
	r.u64() // tensors
	kvs := r.u64()
	for i := uint64(0); i < kvs && r.err == nil; i++ {
		key := r.str()
		typ := r.u32()
		if key == "general.architecture" && typ == ggufString {
			if s := r.str(); r.err == nil {
				return s, nil
			}
			break
		}
		r.skip(typ)
	}
	if r.err != nil {
		return "", fmt.Errorf("%s: reading the GGUF metadata: %w", filepath.Base(path), r.err)
	}
	return "", fmt.Errorf("%s has no general.architecture", filepath.Base(path))
}

// GGUF metadata value types.
const (
	ggufString = 8
	ggufArray  = 9
)

// ggufSizes are the sizes of the fixed-size value types, by type.
var ggufSizes = map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

// ggufReader reads little-endian values; the first error sticks.
type ggufReader struct {
	r   *bufio.Reader
	err error
}

// maxGGUFString bounds one metadata string (a tokenizer's vocabulary
// entries are short; a chat template a few KB).
const maxGGUFString = 1 << 24

func (g *ggufReader) bytes(n int) []byte {
	if g.err != nil {
		return nil
	}
	b := make([]byte, n)
	_, g.err = io.ReadFull(g.r, b)
	return b
}

func (g *ggufReader) u32() uint32 {
	b := g.bytes(4)
	if g.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (g *ggufReader) u64() uint64 {
	b := g.bytes(8)
	if g.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (g *ggufReader) str() string {
	n := g.u64()
	if g.err == nil && n > maxGGUFString {
		g.err = fmt.Errorf("a string of %d bytes", n)
	}
	return string(g.bytes(int(n)))
}

func (g *ggufReader) discard(n uint64) {
	if g.err == nil {
		_, g.err = g.r.Discard(int(n))
	}
}

func (g *ggufReader) skip(typ uint32) {
	switch {
	case g.err != nil:
	case typ == ggufString:
		n := g.u64()
		if g.err == nil && n > maxGGUFString {
			g.err = fmt.Errorf("a string of %d bytes", n)
		}
		g.discard(n)
	case typ == ggufArray:
		et, n := g.u32(), g.u64()
		if size, ok := ggufSizes[et]; ok {
			if g.err == nil && n > 1<<40/uint64(size) {
				g.err = errors.New("an array too long")
			}
			g.discard(n * uint64(size))
			return
		}
		for i := uint64(0); i < n && g.err == nil; i++ {
			g.skip(et)
		}
	default:
		size, ok := ggufSizes[typ]
		if !ok {
			g.err = fmt.Errorf("unknown metadata type %d", typ)
			return
		}
		g.discard(uint64(size))
	}
}
