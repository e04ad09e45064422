package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/llmserve/llmserve/gguf"
)

// Poison copies the GGUF model at src to dst with the given rows of one F32
// or F16 tensor overwritten with NaN. A model poisoned in a row of
// token_embd.weight produces NaN logits for every sequence that contains
// that token and normal ones for every other sequence: a real engine
// failure confined to chosen sequences, for tests of failure isolation.
func Poison(src, dst, tensor string, rows []int) error {
	f, data, err := loadGGUF(src)
	if err != nil {
		return fmt.Errorf("poison: %w", err)
	}
	var ti *gguf.TensorInfo
	for i := range f.Tensors {
		if f.Tensors[i].Name == tensor {
			ti = &f.Tensors[i]
		}
	}
	if ti == nil {
		return fmt.Errorf("poison %s: no tensor %q", src, tensor)
	}
	var elem int
	var nan []byte
	switch ti.Type {
	case gguf.F32:
		elem, nan = 4, binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))
	case gguf.F16:
		elem, nan = 2, []byte{0x00, 0x7e} // a quiet NaN in half precision
	default:
		return fmt.Errorf("poison %s: tensor %q is %v; only F32 and F16 rows can be poisoned", src, tensor, ti.Type)
	}
	td, err := f.TensorData(data, *ti)
	if err != nil {
		return fmt.Errorf("poison %s: %w", src, err)
	}
	rowLen := int(ti.Shape[0])
	nRows := int(ti.Elements()) / rowLen
	for _, r := range rows {
		if r < 0 || r >= nRows {
			return fmt.Errorf("poison %s: row %d outside [0, %d) of %q", src, r, nRows, tensor)
		}
		for j := range rowLen {
			copy(td[(r*rowLen+j)*elem:], nan)
		}
	}
	return os.WriteFile(dst, data, 0o644)
}
