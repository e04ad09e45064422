package synth

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/gguf"
	"github.com/llmserve/llmserve/models/stories260k"
)

func tinyAudio(t *testing.T) ProjectorShape {
	t.Helper()
	s, err := LookupProjectorShape("tiny-audio")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAudioProjectorRoundTrip reads back the tiny audio projector: the keys
// clip.cpp reads for a qwen2a audio encoder, with their types, and every
// tensor with its shape and type.
func TestAudioProjectorRoundTrip(t *testing.T) {
	_, f := writeTinyProjector(t, ProjectorOptions{Shape: tinyAudio(t), NEmbd: 48, Seed: 1, DType: F16})
	want := map[string]any{
		"general.architecture":                    "clip",
		"general.type":                            "mmproj",
		"general.file_type":                       uint32(1),
		"clip.has_vision_encoder":                 false,
		"clip.has_audio_encoder":                  true,
		"clip.projector_type":                     "qwen2a",
		"clip.audio.projection_dim":               uint32(48),
		"clip.audio.embedding_length":             uint32(32),
		"clip.audio.feed_forward_length":          uint32(128),
		"clip.audio.block_count":                  uint32(1),
		"clip.audio.attention.head_count":         uint32(2),
		"clip.audio.attention.layer_norm_epsilon": float32(1e-5),
		"clip.audio.num_mel_bins":                 uint32(128),
	}
	for k, v := range want {
		got, ok := f.Lookup(k)
		if !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	for _, k := range []string{"clip.vision.image_size", "clip.use_gelu", "clip.audio.projector.stack_factor"} {
		if _, ok := f.Lookup(k); ok {
			t.Errorf("%s written", k)
		}
	}
	shapes := map[string][]uint64{
		"a.conv1d.1.weight":      {3, 128, 32},
		"a.conv1d.1.bias":        {1, 32},
		"a.conv1d.2.weight":      {3, 32, 32},
		"a.conv1d.2.bias":        {1, 32},
		"a.position_embd.weight": {32, 1500},
		"a.post_ln.weight":       {32},
		"a.post_ln.bias":         {32},
		"mm.a.fc.weight":         {32, 48},
		"mm.a.fc.bias":           {48},
	}
	b := "a.blk.0."
	for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
		shapes[b+n+".weight"] = []uint64{32, 32}
		if n != "attn_k" {
			shapes[b+n+".bias"] = []uint64{32}
		}
	}
	for _, n := range []string{"ln1", "ln2"} {
		shapes[b+n+".weight"] = []uint64{32}
		shapes[b+n+".bias"] = []uint64{32}
	}
	shapes[b+"ffn_up.weight"] = []uint64{32, 128}
	shapes[b+"ffn_up.bias"] = []uint64{128}
	shapes[b+"ffn_down.weight"] = []uint64{128, 32}
	shapes[b+"ffn_down.bias"] = []uint64{32}
	if len(f.Tensors) != len(shapes) {
		t.Errorf("%d tensors, want %d", len(f.Tensors), len(shapes))
	}
	for _, ti := range f.Tensors {
		s, ok := shapes[ti.Name]
		if !ok || !reflect.DeepEqual(ti.Shape, s) {
			t.Errorf("%s: shape %v, want %v", ti.Name, ti.Shape, s)
		}
		// F16: the conv1d kernels always (as the converter writes them),
		// the matrices with DType F16; the rest F32.
		half := strings.HasPrefix(ti.Name, "a.conv1d.") && strings.HasSuffix(ti.Name, ".weight") ||
			len(ti.Shape) == 2 && ti.Shape[0] > 1 && ti.Name != "a.position_embd.weight"
		if wantT := map[bool]gguf.TensorType{true: gguf.F16, false: gguf.F32}[half]; ti.Type != wantT {
			t.Errorf("%s: type %v, want %v", ti.Name, ti.Type, wantT)
		}
	}
}

// TestAudioProjectorDeterministic: the same options give the same bytes,
// and the tiny-audio projector of seed 1 keeps the golden's checksum.
func TestAudioProjectorDeterministic(t *testing.T) {
	s := tinyAudio(t)
	p1, _ := writeTinyProjector(t, ProjectorOptions{Shape: s, NEmbd: 64, Seed: 1})
	p2, _ := writeTinyProjector(t, ProjectorOptions{Shape: s, NEmbd: 64, Seed: 1})
	p3, _ := writeTinyProjector(t, ProjectorOptions{Shape: s, NEmbd: 64, Seed: 2})
	b1, b2, b3 := readFile(t, p1), readFile(t, p2), readFile(t, p3)
	if !bytes.Equal(b1, b2) {
		t.Error("two writes with the same seed differ")
	}
	if bytes.Equal(b1, b3) {
		t.Error("seeds 1 and 2 give the same file")
	}
	if got, want := sha256Hex(b1), readAudioGolden(t).Projector.SHA256; got != want {
		t.Errorf("tiny-audio projector of seed 1: sha256 %s, want %s", got, want)
	}
}

// TestAudioProjectorWeightsFinite checks every value is finite and small.
func TestAudioProjectorWeightsFinite(t *testing.T) {
	for _, dt := range []DType{F32, F16} {
		path, f := writeTinyProjector(t, ProjectorOptions{Shape: tinyAudio(t), NEmbd: 64, Seed: 7, DType: dt})
		data := readFile(t, path)
		for _, ti := range f.Tensors {
			raw, err := f.TensorData(data, ti)
			if err != nil {
				t.Fatal(err)
			}
			vals, err := toF32(ti, raw)
			if err != nil {
				t.Fatal(err)
			}
			var nonzero bool
			for _, v := range vals {
				if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 1 {
					t.Fatalf("%s %s: value %v", dt, ti.Name, v)
				}
				nonzero = nonzero || v != 0
			}
			zeroOK := strings.HasSuffix(ti.Name, "ln1.bias") || strings.HasSuffix(ti.Name, "ln2.bias") || ti.Name == "a.post_ln.bias"
			if !nonzero && !zeroOK {
				t.Errorf("%s %s: all zero", dt, ti.Name)
			}
		}
	}
}

func TestAudioShape(t *testing.T) {
	s := tinyAudio(t)
	if n := s.TokensPerAudioChunk(); n != 750 {
		t.Errorf("%d tokens per 30-s window, want 750", n)
	}
	if n := s.TokensPerTile(); n != 0 {
		t.Errorf("an audio shape has %d tokens per tile", n)
	}
	v, _ := LookupProjectorShape("tiny")
	if v.IsAudio() || v.TokensPerAudioChunk() != 0 || !s.IsAudio() {
		t.Error("IsAudio")
	}
	var n uint64
	for _, t := range audioPlan(s, 64, gguf.F32) {
		n += t.Elements()
	}
	if n != 78272 {
		t.Errorf("tiny-audio has %d parameters for D=64; doc.go says 78272", n)
	}
	for _, c := range []struct{ samples, chunks int }{
		{0, 0}, {1, 1}, {16000, 1}, {31 * 16000, 1},
		// mel frames are counted on the clip alone: (n-400)/160+1 must
		// reach 6000 for a second window, so 60 s is still one.
		{60 * 16000, 1}, {400 + 5999*160 - 1, 1}, {400 + 5999*160, 2}, {61 * 16000, 2}, {100 * 16000, 3},
	} {
		if got := AudioChunks(c.samples); got != c.chunks {
			t.Errorf("%d samples: %d windows, want %d", c.samples, got, c.chunks)
		}
	}
	for _, bad := range []func(*ProjectorShape){
		func(s *ProjectorShape) { s.NMel = 0 },
		func(s *ProjectorShape) { s.Positions = 1499 },
		func(s *ProjectorShape) { s.Heads = 3 },
		func(s *ProjectorShape) { s.ImageSize = 64 },
		func(s *ProjectorShape) { s.Projector = "ultravox" },
	} {
		b := s
		bad(&b)
		if _, err := WriteProjector(filepath.Join(t.TempDir(), "x.gguf"), ProjectorOptions{Shape: b, NEmbd: 8}); err == nil {
			t.Errorf("%+v: no error", b)
		}
	}
}

// TestWriteWithAudioTokens adds qwen2a's audio markers to stories260K.
func TestWriteWithAudioTokens(t *testing.T) {
	base, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "audio.gguf")
	added, err := WriteWithMarkerTokens(out, base, tinyAudio(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(added, Qwen2AudioTokens) {
		t.Errorf("added %q, want %q", added, Qwen2AudioTokens)
	}
	f, err := readGGUFFile(out)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Lookup("tokenizer.ggml.tokens")
	if tk := toks.([]string); len(tk) != 514 || tk[512] != "<|audio_bos|>" || tk[513] != "<|audio_eos|>" {
		t.Errorf("%d tokens, last %q; want 514 ending with the markers at 512 and 513", len(tk), tk[len(tk)-2:])
	}
	g := readAudioGolden(t)
	if sha := sha256Hex(readFile(t, out)); sha != g.TextModel.SHA256 {
		t.Errorf("stories260K with audio tokens: sha256 %s, want the golden's %s", sha, g.TextModel.SHA256)
	}
	if again, err := WriteWithAudioTokens(filepath.Join(t.TempDir(), "again.gguf"), out); err != nil || len(again) != 0 {
		t.Errorf("second pass added %q, %v", again, err)
	}
}

func TestAudioProjectorCommand(t *testing.T) {
	base, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mm, txt := filepath.Join(dir, "mm.gguf"), filepath.Join(dir, "audio.gguf")
	cmd := NewProjectorCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--shape", "tiny-audio", "--base", base, "--base-out", txt, "-o", mm})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err, out.String())
	}
	for _, want := range []string{"wrote " + mm + ": qwen2a audio projector tiny-audio, output width 64, 750 tokens per 30 s of audio", "with 2 audio tokens added"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	g := readAudioGolden(t)
	if sha256Hex(readFile(t, mm)) != g.Projector.SHA256 || sha256Hex(readFile(t, txt)) != g.TextModel.SHA256 {
		t.Error("the command's files are not the golden's")
	}
}

// audioGolden is testdata/mmproj/golden-audio.json: a llama-mtmd-cli run
// of stories260K (with the audio tokens) and the tiny-audio projector on
// sweep-1s.wav.
type audioGolden struct {
	Command   []string `json:"command"`
	Projector struct {
		Shape  string `json:"shape"`
		Type   string `json:"type"`
		Seed   uint64 `json:"seed"`
		NEmbd  int    `json:"n_embd"`
		SHA256 string `json:"sha256"`
	} `json:"projector"`
	TextModel struct {
		Added    []string `json:"added"`
		AddedIDs []int    `json:"added_ids"`
		SHA256   string   `json:"sha256"`
	} `json:"text_model"`
	Audio struct {
		File    string `json:"file"`
		Samples int    `json:"samples"`
		SHA256  string `json:"sha256"`
	} `json:"audio"`
	Prompt       string `json:"prompt"`
	PromptChunks []struct {
		Text        []int `json:"text"`
		AudioTokens int   `json:"audio_tokens"`
	} `json:"prompt_chunks"`
	NPromptTokens int    `json:"n_prompt_tokens"`
	AudioTokens   int    `json:"n_audio_tokens"`
	NPredict      int    `json:"n_predict"`
	GeneratedIDs  []int  `json:"generated_ids"`
	Text          string `json:"text"`
}

func readAudioGolden(t *testing.T) audioGolden {
	t.Helper()
	var g audioGolden
	if err := json.Unmarshal(readFile(t, "testdata/mmproj/golden-audio.json"), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAudioGolden checks the golden against itself and the code: the WAV
// is sweepWAV's, the audio chunk's size is AudioChunks' and
// TokensPerAudioChunk's, the markers frame it, and the counts add up.
func TestAudioGolden(t *testing.T) {
	g := readAudioGolden(t)
	b := readFile(t, filepath.Join("testdata/mmproj", g.Audio.File))
	if !bytes.Equal(b, sweepWAV()) || sha256Hex(b) != g.Audio.SHA256 {
		t.Errorf("%s is not sweepWAV's, or not the golden's", g.Audio.File)
	}
	if n := (len(b) - 44) / 2; n != g.Audio.Samples {
		t.Errorf("%d samples, the golden says %d", n, g.Audio.Samples)
	}
	s, err := LookupProjectorShape(g.Projector.Shape)
	if err != nil || s.Projector != g.Projector.Type {
		t.Fatalf("shape %s: %v, type %q", g.Projector.Shape, err, s.Projector)
	}
	if n := AudioChunks(g.Audio.Samples) * s.TokensPerAudioChunk(); n != g.AudioTokens {
		t.Errorf("%d audio tokens, the golden says %d", n, g.AudioTokens)
	}
	if !reflect.DeepEqual(g.TextModel.Added, Qwen2AudioTokens) {
		t.Errorf("golden added %q", g.TextModel.Added)
	}
	var total, audio int
	var kinds []string
	for _, c := range g.PromptChunks {
		total += len(c.Text) + c.AudioTokens
		audio += c.AudioTokens
		kinds = append(kinds, map[bool]string{true: "audio", false: "text"}[c.AudioTokens > 0])
	}
	if fmt.Sprint(kinds) != "[text audio text]" || total != g.NPromptTokens || audio != g.AudioTokens {
		t.Errorf("chunks %v, %d tokens (%d audio); the golden says %d (%d)", kinds, total, audio, g.NPromptTokens, g.AudioTokens)
	}
	// <|audio_bos|> ends the text before the audio, <|audio_eos|> opens the text after it.
	first, last := g.PromptChunks[0].Text, g.PromptChunks[2].Text
	if first[len(first)-1] != g.TextModel.AddedIDs[0] || last[0] != g.TextModel.AddedIDs[1] {
		t.Errorf("the audio is not framed by the marker ids %v", g.TextModel.AddedIDs)
	}
	if len(g.GeneratedIDs) != g.NPredict || g.Text == "" {
		t.Errorf("%d generated ids for n_predict %d, text %q", len(g.GeneratedIDs), g.NPredict, g.Text)
	}
}

// sweepWAV is testdata/mmproj/sweep-1s.wav: one second of 16 kHz mono
// 16-bit PCM, a linear sine sweep from 200 Hz to 2 kHz at half scale,
// with 10 ms fades at both ends.
func sweepWAV() []byte {
	const (
		rate       = AudioSampleRate
		n          = rate // 1 s
		f0, f1     = 200.0, 2000.0
		fadeLength = rate / 100
	)
	var pcm bytes.Buffer
	for i := range n {
		t := float64(i) / rate
		// phase of a linear chirp: 2π(f0·t + (f1-f0)·t²/2) over 1 s
		v := 0.5 * math.Sin(2*math.Pi*(f0*t+(f1-f0)*t*t/2))
		if i < fadeLength {
			v *= float64(i) / fadeLength
		} else if n-1-i < fadeLength {
			v *= float64(n-1-i) / fadeLength
		}
		binary.Write(&pcm, binary.LittleEndian, int16(math.Round(v*32767)))
	}
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + pcm.Len()))
	b.WriteString("WAVEfmt ")
	le(uint32(16))       // fmt chunk size
	le(uint16(1))        // PCM
	le(uint16(1))        // mono
	le(uint32(rate))     // sample rate
	le(uint32(rate * 2)) // byte rate
	le(uint16(2))        // block align
	le(uint16(16))       // bits per sample
	b.WriteString("data")
	le(uint32(pcm.Len()))
	b.Write(pcm.Bytes())
	return b.Bytes()
}

// TestWriteWithContextLength raises stories260K's trained context and
// changes nothing else.
func TestWriteWithContextLength(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.gguf")
	if err := os.WriteFile(base, stories260k.GGUF(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "long.gguf")
	if err := WriteWithContextLength(out, base, 1024); err != nil {
		t.Fatal(err)
	}
	a, err := readGGUFFile(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readGGUFFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Lookup("llama.context_length"); v != uint32(1024) {
		t.Errorf("context_length %v (%T), want uint32 1024", v, v)
	}
	if len(a.KVs) != len(b.KVs) || len(a.Tensors) != len(b.Tensors) {
		t.Errorf("%d keys, %d tensors; the base has %d, %d", len(b.KVs), len(b.Tensors), len(a.KVs), len(a.Tensors))
	}
}
