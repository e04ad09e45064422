package graph

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
)

// The CNN operators, on [batch, channels, height, width] inputs (2-D
// images; the batch is dimension 0 as everywhere): Conv (any group),
// BatchNormalization (inference), MaxPool, AveragePool and
// GlobalAveragePool. The activations CNN exports put between them (Clip,
// LeakyRelu, HardSigmoid) are core operators (Activation, unaryFunc).

// Window is a 2-D convolution or pooling window, resolved for an input of
// InH × InW: the output is OutH × OutW.
type Window struct {
	KH, KW                 int64
	SH, SW                 int64 // strides
	DH, DW                 int64 // dilations
	PadT, PadL, PadB, PadR int64
	InH, InW, OutH, OutW   int64
}

// rows yields, for output row oh, each kernel row kh whose input row ih
// lies inside the image (not in the padding), with ih.
func (w *Window) rows(oh int64) iter.Seq2[int64, int64] {
	return taps(oh*w.SH-w.PadT, w.KH, w.DH, w.InH)
}

// cols is rows for output column ow: kernel column kw, input column iw.
func (w *Window) cols(ow int64) iter.Seq2[int64, int64] {
	return taps(ow*w.SW-w.PadL, w.KW, w.DW, w.InW)
}

// taps yields each k below size whose position start + k*dilation lies
// in [0, in), with that position.
func taps(start, size, dilation, in int64) iter.Seq2[int64, int64] {
	return func(yield func(k, i int64) bool) {
		for k := range size {
			if i := start + k*dilation; i >= 0 && i < in && !yield(k, i) {
				return
			}
		}
	}
}

// maxWindow bounds kernel sizes, strides, dilations and pads, so that no
// window arithmetic overflows.
const maxWindow = 1 << 16

// window resolves n's kernel_shape (or kernel, from the weights),
// strides, dilations, pads, auto_pad and ceil_mode for input x [B, C, H,
// W].
func window(n *Node, x []int64, kernel []int64, ceil bool) (*Window, error) {
	if len(x) != 4 {
		return nil, fmt.Errorf("input shape %v: only 2-D images [batch, channels, height, width] are supported: %w", x, ErrUnsupported)
	}
	if k := attrInts(n, "kernel_shape"); k != nil || kernel == nil {
		if kernel != nil && !slices.Equal(k, kernel) {
			return nil, fmt.Errorf("kernel_shape %v differs from the weights' %v", k, kernel)
		}
		kernel = k
	}
	pair := func(name string, def int64) ([2]int64, error) {
		v := attrInts(n, name)
		switch {
		case v == nil:
			return [2]int64{def, def}, nil
		case len(v) != 2 || v[0] < 1 || v[1] < 1 || v[0] > maxWindow || v[1] > maxWindow:
			return [2]int64{}, fmt.Errorf("attribute %s=%v: want two values from 1 to %d", name, v, maxWindow)
		}
		return [2]int64{v[0], v[1]}, nil
	}
	if len(kernel) != 2 || kernel[0] < 1 || kernel[1] < 1 || kernel[0] > maxWindow || kernel[1] > maxWindow {
		return nil, fmt.Errorf("kernel shape %v: want two values from 1 to %d", kernel, maxWindow)
	}
	s, err := pair("strides", 1)
	if err != nil {
		return nil, err
	}
	d, err := pair("dilations", 1)
	if err != nil {
		return nil, err
	}
	w := &Window{KH: kernel[0], KW: kernel[1], SH: s[0], SW: s[1], DH: d[0], DW: d[1], InH: x[2], InW: x[3]}
	pads := attrInts(n, "pads")
	switch p := n.Str("auto_pad", "NOTSET"); p {
	case "NOTSET":
		if pads == nil {
			pads = []int64{0, 0, 0, 0}
		}
		if len(pads) != 4 || slices.ContainsFunc(pads, func(v int64) bool { return v < 0 || v > maxWindow }) {
			return nil, fmt.Errorf("attribute pads=%v: want four values from 0 to %d", pads, maxWindow)
		}
		w.PadT, w.PadL, w.PadB, w.PadR = pads[0], pads[1], pads[2], pads[3]
	case "VALID":
	case "SAME_UPPER", "SAME_LOWER":
		same := func(in, k, s, d int64) (int64, int64) {
			out := (in + s - 1) / s
			total := max(0, (out-1)*s+(k-1)*d+1-in)
			if p == "SAME_UPPER" {
				return total / 2, total - total/2
			}
			return total - total/2, total / 2
		}
		w.PadT, w.PadB = same(w.InH, w.KH, w.SH, w.DH)
		w.PadL, w.PadR = same(w.InW, w.KW, w.SW, w.DW)
	default:
		return nil, unsupportedAttr("auto_pad=%q", p)
	}
	size := func(in, k, s, d, pb, pe int64) int64 {
		span := in + pb + pe - (k-1)*d - 1
		if span < 0 {
			return 0
		}
		out := span/s + 1
		if ceil && span%s != 0 {
			out++
			if (out-1)*s >= in+pb { // ONNX Runtime drops a window that starts in the end padding
				out--
			}
		}
		return out
	}
	w.OutH = size(w.InH, w.KH, w.SH, w.DH, w.PadT, w.PadB)
	w.OutW = size(w.InW, w.KW, w.SW, w.DW, w.PadL, w.PadR)
	if w.OutH < 1 || w.OutW < 1 {
		return nil, fmt.Errorf("the window %dx%d does not fit the input %dx%d", w.KH, w.KW, w.InH, w.InW)
	}
	if float64(x[1])*float64(w.OutH)*float64(w.OutW) > MaxRowElements {
		return nil, fmt.Errorf("the output has more than %d elements per row", MaxRowElements)
	}
	if w.PadT >= (w.KH-1)*w.DH+1 || w.PadB >= (w.KH-1)*w.DH+1 || w.PadL >= (w.KW-1)*w.DW+1 || w.PadR >= (w.KW-1)*w.DW+1 {
		return nil, fmt.Errorf("pads %d,%d,%d,%d are as large as the window: %w", w.PadT, w.PadL, w.PadB, w.PadR, ErrUnsupported)
	}
	return w, nil
}

func (c *Checked) imageInput(n *Node) (*Info, error) {
	x, err := c.floatInput(n, 0)
	if err != nil {
		return nil, err
	}
	if len(x.Shape) != 4 || !x.Batched {
		return nil, fmt.Errorf("input %q has shape %v; the operator takes [batch, channels, height, width]: %w", n.Inputs[0], x.Shape, ErrUnsupported)
	}
	return x, nil
}

// constInput is input i, which must be an F32 initializer of shape want
// (nil: any).
func (c *Checked) constInput(n *Node, i int, want []int64) (*Info, error) {
	p, err := c.floatInput(n, i)
	if err != nil {
		return nil, err
	}
	if p.Const == nil {
		return nil, fmt.Errorf("input %q must be an initializer: %w", n.Inputs[i], ErrUnsupported)
	}
	if want != nil && !slices.Equal(p.Shape, want) {
		return nil, fmt.Errorf("input %q has shape %v, want %v", n.Inputs[i], p.Shape, want)
	}
	return p, nil
}

// ConvWindow is a Conv node's window for input shape x.
func ConvWindow(c *Checked, n *Node, x []int64) (*Window, error) {
	w := c.Values[n.Inputs[1]]
	return window(n, x, w.Shape[2:], false)
}

func inferConv(c *Checked, n *Node) ([]*Info, error) {
	x, err := c.imageInput(n)
	if err != nil {
		return nil, err
	}
	w, err := c.constInput(n, 1, nil)
	if err != nil {
		return nil, err
	}
	if len(w.Shape) != 4 {
		return nil, fmt.Errorf("weights of shape %v: only 2-D convolutions are supported: %w", w.Shape, ErrUnsupported)
	}
	g := n.Int("group", 1)
	if g < 1 || x.Shape[1]%g != 0 || w.Shape[0]%g != 0 {
		return nil, fmt.Errorf("attribute group=%d does not divide the %d input and %d output channels", g, x.Shape[1], w.Shape[0])
	}
	if w.Shape[1] != x.Shape[1]/g {
		return nil, fmt.Errorf("weights %v for %d input channels in %d groups", w.Shape, x.Shape[1], g)
	}
	if optional(n, 2) {
		if _, err := c.constInput(n, 2, []int64{w.Shape[0]}); err != nil {
			return nil, err
		}
	}
	win, err := window(n, x.Shape, w.Shape[2:], false)
	if err != nil {
		return nil, err
	}
	if float64(win.KH*win.KW)*float64(x.Shape[1])*float64(win.OutH*win.OutW) > MaxRowElements {
		return nil, fmt.Errorf("the convolution's unfolded input has more than %d elements per row", MaxRowElements)
	}
	return []*Info{{DType: F32, Shape: []int64{Batch, w.Shape[0], win.OutH, win.OutW}, Batched: true}}, nil
}

func evalConv(c *Checked, n *Node, in []*Dense) ([]*Dense, error) {
	x, wt := in[0], in[1]
	win, err := window(n, x.Shape, wt.Shape[2:], false)
	if err != nil {
		return nil, err
	}
	nb, ch, m := x.Shape[0], x.Shape[1], wt.Shape[0]
	group := n.Int("group", 1)
	cg, mg := ch/group, m/group // channels per group, in and out
	y := make([]float32, nb*m*win.OutH*win.OutW)
	i := 0
	for b := range nb {
		for o := range m {
			for oh := range win.OutH {
				for ow := range win.OutW {
					var s float64
					if len(in) > 2 && in[2] != nil {
						s = float64(in[2].F32[o])
					}
					for cj := range cg {
						ci := o/mg*cg + cj
						for kh, ih := range win.rows(oh) {
							for kw, iw := range win.cols(ow) {
								s += float64(x.F32[((b*ch+ci)*win.InH+ih)*win.InW+iw]) * float64(wt.F32[((o*cg+cj)*win.KH+kh)*win.KW+kw])
							}
						}
					}
					y[i] = float32(s)
					i++
				}
			}
		}
	}
	return []*Dense{{Shape: []int64{nb, m, win.OutH, win.OutW}, F32: y}}, nil
}

// BatchNormalization (inference): y = (x - mean) / sqrt(var + epsilon) *
// scale + B per channel (dimension 1).

func inferBatchNorm(c *Checked, n *Node) ([]*Info, error) {
	x, err := c.floatInput(n, 0)
	if err != nil {
		return nil, err
	}
	if len(x.Shape) < 2 || !x.Batched {
		return nil, fmt.Errorf("input shape %v has no channel dimension", x.Shape)
	}
	if n.Int("training_mode", 0) != 0 {
		return nil, unsupportedAttr("training_mode=1")
	}
	if n.Int("spatial", 1) != 1 {
		return nil, unsupportedAttr("spatial=0") // before opset 9
	}
	if len(n.Inputs) != 5 {
		return nil, errors.New("want the inputs X, scale, B, input_mean and input_var")
	}
	for i := 1; i <= 4; i++ {
		if _, err := c.constInput(n, i, []int64{x.Shape[1]}); err != nil {
			return nil, err
		}
	}
	return same(x), nil
}

// BatchNormFold is a BatchNormalization's scale and shift per channel:
// y = x * scale + shift, computed in float64 and rounded once.
func BatchNormFold(n *Node, scale, bias, mean, variance []float32) (s, t []float32) {
	eps := float64(n.Float("epsilon", 1e-5))
	s, t = make([]float32, len(scale)), make([]float32, len(scale))
	for i := range scale {
		f := float64(scale[i]) / math.Sqrt(float64(variance[i])+eps)
		s[i] = float32(f)
		t[i] = float32(float64(bias[i]) - float64(mean[i])*f)
	}
	return s, t
}

func evalBatchNorm(_ *Checked, n *Node, in []*Dense) ([]*Dense, error) {
	x := in[0]
	eps := float64(n.Float("epsilon", 1e-5))
	ch := x.Shape[1]
	inner := elements(x.Shape[2:])
	y := make([]float32, len(x.F32))
	for i, v := range x.F32 {
		c := int64(i) / inner % ch
		f := (float64(v) - float64(in[3].F32[c])) / math.Sqrt(float64(in[4].F32[c])+eps)
		y[i] = float32(f*float64(in[1].F32[c]) + float64(in[2].F32[c]))
	}
	return []*Dense{{Shape: x.Shape, F32: y}}, nil
}

// Pooling: MaxPool and AveragePool over a window, GlobalAveragePool over
// the whole image.

// PoolWindow is a pooling node's window for input shape x.
func PoolWindow(n *Node, x []int64) (*Window, error) {
	if n.Op == "GlobalAveragePool" || n.Op == "GlobalMaxPool" {
		return window(&Node{Op: n.Op}, x, x[2:], false)
	}
	return window(n, x, nil, n.Int("ceil_mode", 0) != 0)
}

func inferPool(c *Checked, n *Node) ([]*Info, error) {
	x, err := c.imageInput(n)
	if err != nil {
		return nil, err
	}
	switch {
	case n.Op == "MaxPool" && n.Int("storage_order", 0) != 0:
		return nil, unsupportedAttr("storage_order=1")
	case n.Op == "AveragePool" && hasAttr(n, "dilations") && slices.ContainsFunc(attrInts(n, "dilations"), func(d int64) bool { return d != 1 }):
		return nil, unsupportedAttr("dilations=%v", attrInts(n, "dilations"))
	case n.Op == "AveragePool" && n.Int("count_include_pad", 0) != 0 && n.Int("ceil_mode", 0) != 0:
		return nil, unsupportedAttr("count_include_pad=1 with ceil_mode=1")
	}
	win, err := PoolWindow(n, x.Shape)
	if err != nil {
		return nil, err
	}
	return []*Info{{DType: F32, Shape: []int64{Batch, x.Shape[1], win.OutH, win.OutW}, Batched: true}}, nil
}

func evalPool(_ *Checked, n *Node, in []*Dense) ([]*Dense, error) {
	x := in[0]
	win, err := PoolWindow(n, x.Shape)
	if err != nil {
		return nil, err
	}
	isMax := n.Op == "MaxPool"
	includePad := n.Int("count_include_pad", 0) != 0
	planes := x.Shape[0] * x.Shape[1]
	y := make([]float32, 0, planes*win.OutH*win.OutW)
	for p := range planes {
		plane := x.F32[p*win.InH*win.InW : (p+1)*win.InH*win.InW]
		for oh := range win.OutH {
			for ow := range win.OutW {
				m, s, count := float32(-math.MaxFloat32), 0.0, 0
				for _, ih := range win.rows(oh) {
					for _, iw := range win.cols(ow) {
						v := plane[ih*win.InW+iw]
						if v > m || math.IsNaN(float64(v)) {
							m = v
						}
						s += float64(v)
						count++
					}
				}
				switch {
				case isMax:
					y = append(y, m)
				case includePad:
					y = append(y, float32(s/float64(win.KH*win.KW)))
				default:
					y = append(y, float32(s/float64(count)))
				}
			}
		}
	}
	return []*Dense{{Shape: []int64{x.Shape[0], x.Shape[1], win.OutH, win.OutW}, F32: y}}, nil
}
