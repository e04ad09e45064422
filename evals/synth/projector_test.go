package synth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/gguf"
	"github.com/llmserve/llmserve/models/stories260k"
)

func writeTinyProjector(t *testing.T, o ProjectorOptions) (string, *gguf.File) {
	t.Helper()
	if o.Shape.Name == "" {
		s, err := LookupProjectorShape("tiny")
		if err != nil {
			t.Fatal(err)
		}
		o.Shape = s
	}
	path := filepath.Join(t.TempDir(), "mm.gguf")
	if _, err := WriteProjector(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := readGGUFFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, f
}

// TestProjectorRoundTrip reads back the tiny projector: the keys clip.cpp
// reads, with their types, and every tensor with its shape and type.
func TestProjectorRoundTrip(t *testing.T) {
	_, f := writeTinyProjector(t, ProjectorOptions{NEmbd: 48, Seed: 1, DType: F16})
	want := map[string]any{
		"general.architecture":                     "clip",
		"general.type":                             "mmproj",
		"general.file_type":                        uint32(1),
		"clip.has_vision_encoder":                  true,
		"clip.projector_type":                      "idefics3",
		"clip.use_gelu":                            true,
		"clip.vision.projection_dim":               uint32(48),
		"clip.vision.image_size":                   uint32(64),
		"clip.vision.patch_size":                   uint32(8),
		"clip.vision.embedding_length":             uint32(64),
		"clip.vision.feed_forward_length":          uint32(256),
		"clip.vision.block_count":                  uint32(2),
		"clip.vision.attention.head_count":         uint32(4),
		"clip.vision.attention.layer_norm_epsilon": float32(1e-6),
		"clip.vision.image_mean":                   []float32{0.5, 0.5, 0.5},
		"clip.vision.image_std":                    []float32{0.5, 0.5, 0.5},
		"clip.vision.projector.scale_factor":       uint32(2),
		"clip.vision.preproc_image_size":           uint32(64),
	}
	for k, v := range want {
		got, ok := f.Lookup(k)
		if !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	shapes := map[string][]uint64{
		"v.patch_embd.weight":    {8, 8, 3, 64},
		"v.patch_embd.bias":      {64},
		"v.position_embd.weight": {64, 64},
		"v.post_ln.weight":       {64},
		"v.post_ln.bias":         {64},
		"mm.model.fc.weight":     {256, 48},
	}
	for i := range 2 {
		b := "v.blk." + string(rune('0'+i)) + "."
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			shapes[b+n+".weight"] = []uint64{64, 64}
			shapes[b+n+".bias"] = []uint64{64}
		}
		for _, n := range []string{"ln1", "ln2"} {
			shapes[b+n+".weight"] = []uint64{64}
			shapes[b+n+".bias"] = []uint64{64}
		}
		shapes[b+"ffn_up.weight"] = []uint64{64, 256}
		shapes[b+"ffn_up.bias"] = []uint64{256}
		shapes[b+"ffn_down.weight"] = []uint64{256, 64}
		shapes[b+"ffn_down.bias"] = []uint64{64}
	}
	if len(f.Tensors) != len(shapes) {
		t.Errorf("%d tensors, want %d", len(f.Tensors), len(shapes))
	}
	for _, ti := range f.Tensors {
		s, ok := shapes[ti.Name]
		if !ok || !reflect.DeepEqual(ti.Shape, s) {
			t.Errorf("%s: shape %v, want %v", ti.Name, ti.Shape, s)
		}
		matrix := len(ti.Shape) == 2 && ti.Name != "v.position_embd.weight"
		if wantT := map[bool]gguf.TensorType{true: gguf.F16, false: gguf.F32}[matrix]; ti.Type != wantT {
			t.Errorf("%s: type %v, want %v", ti.Name, ti.Type, wantT)
		}
	}
}

// TestProjectorDeterministic: the same options give the same bytes, and
// the tiny projector of seed 1 keeps its checksum (testdata/mmproj's
// golden was generated with it).
func TestProjectorDeterministic(t *testing.T) {
	p1, _ := writeTinyProjector(t, ProjectorOptions{NEmbd: 64, Seed: 1})
	p2, _ := writeTinyProjector(t, ProjectorOptions{NEmbd: 64, Seed: 1})
	p3, _ := writeTinyProjector(t, ProjectorOptions{NEmbd: 64, Seed: 2})
	b1, b2, b3 := readFile(t, p1), readFile(t, p2), readFile(t, p3)
	if !bytes.Equal(b1, b2) {
		t.Error("two writes with the same seed differ")
	}
	if bytes.Equal(b1, b3) {
		t.Error("seeds 1 and 2 give the same file")
	}
	g := readGolden(t)
	if got := sha256Hex(b1); got != g.Projector.SHA256 {
		t.Errorf("tiny projector of seed 1: sha256 %s, want %s", got, g.Projector.SHA256)
	}
}

// TestProjectorWeightsFinite checks every value is finite and small, so
// that activations stay finite through the encoder.
func TestProjectorWeightsFinite(t *testing.T) {
	for _, dt := range []DType{F32, F16} {
		path, f := writeTinyProjector(t, ProjectorOptions{NEmbd: 64, Seed: 7, DType: dt})
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
			if !nonzero && !strings.HasSuffix(ti.Name, "ln1.bias") && !strings.HasSuffix(ti.Name, "ln2.bias") && ti.Name != "v.post_ln.bias" {
				t.Errorf("%s %s: all zero", dt, ti.Name)
			}
		}
	}
}

func TestProjectorTokens(t *testing.T) {
	s, _ := LookupProjectorShape("tiny")
	if n := s.TokensPerTile(); n != 16 {
		t.Errorf("tiny: %d tokens per tile, want 16", n)
	}
	for _, c := range []struct{ w, h, preproc, tiles int }{
		{64, 64, 64, 2}, {640, 480, 64, 2}, {16, 16, 64, 2}, // one tile and the global image
		{64, 64, 0, 1}, // global image only
		{64, 64, 128, 5}, {128, 64, 128, 3}, {100, 30, 128, 3},
	} {
		s.PreprocImageSize = c.preproc
		if got := s.Tiles(c.w, c.h); got != c.tiles {
			t.Errorf("%dx%d, preproc %d: %d images, want %d", c.w, c.h, c.preproc, got, c.tiles)
		}
	}
	count := func(s ProjectorShape, d int) (n uint64) {
		for _, t := range projectorPlan(s, d, gguf.F32) {
			n += t.Elements()
		}
		return n
	}
	r, _ := LookupProjectorShape("smolvlm-256m")
	if n, m := count(s, 64), count(r, 576); n != 132928 || m != 93510912 {
		t.Errorf("params: tiny %d, smolvlm-256m %d; doc.go says 132928 and 93510912", n, m)
	}
	if n, tiles := r.TokensPerTile(), r.Tiles(1024, 768); n != 64 || tiles != 1+4*3 {
		t.Errorf("smolvlm-256m: %d tokens per tile, %d images for 1024x768; want 64 and 13", n, tiles)
	}
}

func TestProjectorBase(t *testing.T) {
	base, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, f := writeTinyProjector(t, ProjectorOptions{Base: base, Seed: 1})
	if v, _ := f.Lookup("clip.vision.projection_dim"); v != uint32(64) {
		t.Errorf("projection_dim %v, want stories260K's 64", v)
	}
	for _, ti := range f.Tensors {
		if ti.Name == "mm.model.fc.weight" && ti.Shape[1] != 64 {
			t.Errorf("fc: shape %v", ti.Shape)
		}
	}
	s, _ := LookupProjectorShape("tiny")
	if _, err := WriteProjector(filepath.Join(t.TempDir(), "x.gguf"), ProjectorOptions{Shape: s}); err == nil {
		t.Error("no width: no error")
	}
	s.ScaleFactor = 3
	if _, err := WriteProjector(filepath.Join(t.TempDir(), "x.gguf"), ProjectorOptions{Shape: s, NEmbd: 8}); err == nil {
		t.Error("scale factor 3 of 8 patches: no error")
	}
}

// TestWriteWithImageTokens adds the idefics3 tokens stories260K lacks.
func TestWriteWithImageTokens(t *testing.T) {
	base, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "img.gguf")
	added, err := WriteWithImageTokens(out, base)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"\n\n", "<fake_token_around_image>", "<global-img>"}; !reflect.DeepEqual(added, want) {
		t.Errorf("added %q, want %q", added, want)
	}
	f, err := readGGUFFile(out)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Lookup("tokenizer.ggml.tokens")
	if n := len(toks.([]string)); n != 515 {
		t.Errorf("%d tokens, want 515", n)
	}
	data := readFile(t, out)
	for _, ti := range f.Tensors {
		if ti.Name != "token_embd.weight" && ti.Name != "output.weight" {
			continue
		}
		if ti.Shape[1] != 515 {
			t.Errorf("%s: shape %v", ti.Name, ti.Shape)
		}
		raw, _ := f.TensorData(data, ti)
		if tail := raw[len(raw)/515*512:]; !bytes.Equal(tail, make([]byte, len(tail))) {
			t.Errorf("%s: added rows are not zero", ti.Name)
		}
	}
	if sha := sha256Hex(data); sha != readGolden(t).TextModel.SHA256 {
		t.Errorf("stories260K with image tokens: sha256 %s, want the golden's %s", sha, readGolden(t).TextModel.SHA256)
	}
	// Idempotent: a model that has the tokens gets none added.
	if again, err := WriteWithImageTokens(filepath.Join(t.TempDir(), "again.gguf"), out); err != nil || len(again) != 0 {
		t.Errorf("second pass added %q, %v", again, err)
	}
}

func TestProjectorCommand(t *testing.T) {
	base, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mm, img := filepath.Join(dir, "mm.gguf"), filepath.Join(dir, "img.gguf")
	cmd := NewProjectorCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--base", base, "--base-out", img, "-o", mm})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err, out.String())
	}
	for _, want := range []string{"wrote " + mm + ": idefics3 projector tiny, output width 64, 16 tokens per tile", "with 3 image tokens added"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if sha256Hex(readFile(t, mm)) != readGolden(t).Projector.SHA256 {
		t.Error("the command's default projector is not the golden's")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", mm}, "give one of --base and --n-embd"},
		{[]string{"--n-embd", "64"}, "no output file"},
		{[]string{"--n-embd", "64", "-o", mm, "--shape", "x"}, "unknown projector shape"},
		{[]string{"--n-embd", "64", "-o", mm, "--dtype", "q8_0"}, "only f32 and f16"},
		{[]string{"--n-embd", "64", "-o", mm, "--base-out", img}, "--base-out needs --base"},
	} {
		cmd := NewProjectorCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(c.args)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// mmprojGolden is testdata/mmproj/golden.json: a llama-mtmd-cli run of
// stories260K (with the image tokens) and the tiny projector on
// gradient-64.png, for a later test that holds llmserve's image path to it.
type mmprojGolden struct {
	Command   []string `json:"command"`
	Projector struct {
		Shape  string `json:"shape"`
		Seed   uint64 `json:"seed"`
		NEmbd  int    `json:"n_embd"`
		SHA256 string `json:"sha256"`
	} `json:"projector"`
	TextModel struct {
		Base        string `json:"base"`
		ImageTokens bool   `json:"image_tokens_added"`
		SHA256      string `json:"sha256"`
	} `json:"text_model"`
	Image struct {
		File   string `json:"file"`
		SHA256 string `json:"sha256"`
	} `json:"image"`
	Prompt      string `json:"prompt"`
	NPredict    int    `json:"n_predict"`
	ImageTokens int    `json:"n_image_tokens"`
	Text        string `json:"text"`
}

func readGolden(t *testing.T) mmprojGolden {
	t.Helper()
	var g mmprojGolden
	if err := json.Unmarshal(readFile(t, "testdata/mmproj/golden.json"), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// gradientPNG is testdata/mmproj/gradient-64.png: red along x, green along
// y, blue falling along both.
func gradientPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	for y := range 64 {
		for x := range 64 {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 4), uint8(255 - x*2 - y*2), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestProjectorGoldenImage(t *testing.T) {
	g := readGolden(t)
	b := readFile(t, filepath.Join("testdata/mmproj", g.Image.File))
	if !bytes.Equal(b, gradientPNG()) || sha256Hex(b) != g.Image.SHA256 {
		t.Errorf("%s is not gradientPNG's, or not the golden's", g.Image.File)
	}
	s, _ := LookupProjectorShape(g.Projector.Shape)
	if n := s.Tiles(64, 64) * s.TokensPerTile(); n != g.ImageTokens {
		t.Errorf("%d image tokens, the golden says %d", n, g.ImageTokens)
	}
}

// TestDocListsProjectorShapes keeps doc.go's table in step with the code.
func TestDocListsProjectorShapes(t *testing.T) {
	doc := string(readFile(t, "doc.go"))
	for _, s := range projectorShapes {
		fields := []int{s.ImageSize, s.PatchSize, s.Embd, s.FF, s.Layers, s.Heads, s.ScaleFactor, s.PreprocImageSize, s.TokensPerTile()}
		if s.IsAudio() {
			// the audio table: mel, positions, width, ff, layers, heads, tokens/30 s
			fields = []int{s.NMel, s.Positions, s.Embd, s.FF, s.Layers, s.Heads, s.TokensPerAudioChunk()}
		}
		var line []string
		for _, f := range fields {
			line = append(line, strconv.Itoa(f))
		}
		i := strings.Index(doc, "//\t"+s.Name+" ")
		if i < 0 {
			t.Errorf("doc.go does not list %s", s.Name)
			continue
		}
		row := strings.Fields(doc[i+3 : i+strings.IndexByte(doc[i:], '\n')])
		if len(row) < len(line)+1 || strings.Join(row[1:len(line)+1], " ") != strings.Join(line, " ") {
			t.Errorf("doc.go lists %s as %v, want %v", s.Name, row, line)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
