package worker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// GGUF value types (ggml's gguf_type).
const (
	ggufUint8 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufString
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// maxGGUFHeader bounds the metadata read from a model file: vocabularies
// of a few hundred thousand tokens take tens of MiB.
const maxGGUFHeader = 512 << 20

// chatTemplateKey is the GGUF key of the Jinja chat template.
const chatTemplateKey = "tokenizer.chat_template"

// vocabGGUF returns a vocabulary-only GGUF of the model file at path: its
// header and every metadata key/value, byte for byte, with no tensors, as
// llama.cpp's ggml-vocab-*.gguf files are. llama.cpp loads it with
// vocab_only, which is all a head needs to tokenize as the worker does.
// template, when not empty, replaces the file's chat template (the
// worker's --chat-template), so the head renders chats as the worker would.
func vocabGGUF(path, template string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	r := &countingReader{r: bufio.NewReaderSize(f, 1<<20)}
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("read GGUF header: %w", err)
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version < 2 {
		return nil, errors.New("not a GGUF file (version 2 or later)")
	}
	out := make([]byte, 0, 1<<20)
	out = append(out, hdr.Magic[:]...)
	out = binary.LittleEndian.AppendUint32(out, hdr.Version)
	out = binary.LittleEndian.AppendUint64(out, 0) // no tensors
	countAt := len(out)
	out = binary.LittleEndian.AppendUint64(out, hdr.KVs)
	kvs := hdr.KVs
	for i := uint64(0); i < hdr.KVs; i++ {
		start := len(out)
		r.keep = &out
		n, err := readU64(r)
		if err != nil {
			return nil, fmt.Errorf("metadata key %d: %w", i, err)
		}
		if n > 1<<16 {
			return nil, fmt.Errorf("metadata key %d of %d bytes", i, n)
		}
		key := make([]byte, n)
		if _, err := io.ReadFull(r, key); err != nil {
			return nil, fmt.Errorf("metadata key %d: %w", i, err)
		}
		t, err := readU32(r)
		if err != nil {
			return nil, err
		}
		if err := skipValue(r, t, 0); err != nil {
			return nil, fmt.Errorf("metadata value %d: %w", i, err)
		}
		if template != "" && string(key) == chatTemplateKey {
			out = out[:start] // replaced below
			kvs--
		}
		if len(out) > maxGGUFHeader {
			return nil, fmt.Errorf("GGUF metadata larger than %d bytes", maxGGUFHeader)
		}
	}
	r.keep = nil
	if template != "" {
		out = appendString(out, chatTemplateKey)
		out = binary.LittleEndian.AppendUint32(out, ggufString)
		out = appendString(out, template)
		kvs++
	}
	binary.LittleEndian.PutUint64(out[countAt:], kvs)
	return out, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// countingReader copies what it reads into *keep.
type countingReader struct {
	r    io.Reader
	keep *[]byte
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.keep != nil {
		*c.keep = append(*c.keep, p[:n]...)
	}
	return n, err
}

func readU32(r io.Reader) (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func readU64(r io.Reader) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func skip(r io.Reader, n uint64) error {
	if n > maxGGUFHeader {
		return fmt.Errorf("%d bytes is too long", n)
	}
	_, err := io.CopyN(io.Discard, r, int64(n))
	return err
}

func skipString(r io.Reader) error {
	n, err := readU64(r)
	if err != nil {
		return err
	}
	return skip(r, n)
}

func skipValue(r io.Reader, t uint32, depth int) error {
	switch t {
	case ggufUint8, ggufInt8, ggufBool:
		return skip(r, 1)
	case ggufUint16, ggufInt16:
		return skip(r, 2)
	case ggufUint32, ggufInt32, ggufFloat32:
		return skip(r, 4)
	case ggufUint64, ggufInt64, ggufFloat64:
		return skip(r, 8)
	case ggufString:
		return skipString(r)
	case ggufArray:
		if depth > 0 {
			return errors.New("nested GGUF arrays")
		}
		et, err := readU32(r)
		if err != nil {
			return err
		}
		n, err := readU64(r)
		if err != nil {
			return err
		}
		if n > maxGGUFHeader {
			return fmt.Errorf("array of %d elements is too long", n)
		}
		for range n {
			if err := skipValue(r, et, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown GGUF value type %d", t)
}
