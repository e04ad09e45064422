package hostmem

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChurnRSS compares three ways to hold a full prefix cache that churns
// (LLMSERVE_CHURN_MIB of 10 KiB blocks, stories260K's, evicted oldest
// first while as many again are stored, each store copied out of a
// Go-heap export as the engine's are): blocks on the Go heap (before
// hostmem), on the Go heap under a memory limit of 1.15 × the cache
// (debug.SetMemoryLimit, through GOMEMLIMIT), and in an Arena. Each runs
// in a process of its own and reports its peak RSS, collector cycles and
// CPU time. Beside the cache, each keeps LLMSERVE_CHURN_LIVE_MIB (default
// 32) of small linked objects live, the rest of a server's heap, which the
// collector must mark. It is a measurement, not a check: skipped unless
// LLMSERVE_CHURN_MIB is set (docs/design/decisions.md has the figures).
//
//	LLMSERVE_CHURN_MIB=1024 go test -run TestChurnRSS -v ./hostmem/
func TestChurnRSS(t *testing.T) {
	mib, _ := strconv.Atoi(os.Getenv("LLMSERVE_CHURN_MIB"))
	if mib <= 0 {
		t.Skip("set LLMSERVE_CHURN_MIB to measure")
	}
	limit := strconv.Itoa(int(float64(mib<<20) * 1.15))
	for _, mode := range []struct{ name, env string }{
		{"go-heap", "GOMEMLIMIT=off"},
		{"go-heap, GOMEMLIMIT=1.15×cache", "GOMEMLIMIT=" + limit},
		{"hostmem", "GOMEMLIMIT=off"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChurnChild$", "-test.v")
		cmd.Env = append(os.Environ(), "LLMSERVE_CHURN_CHILD="+mode.name, mode.env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode.name, err, out)
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "churn:") {
				t.Logf("%-32s %s", mode.name, strings.TrimPrefix(strings.TrimSpace(line), "churn: "))
			}
		}
	}
}

func TestChurnChild(t *testing.T) {
	mode := os.Getenv("LLMSERVE_CHURN_CHILD")
	mib, _ := strconv.Atoi(os.Getenv("LLMSERVE_CHURN_MIB"))
	if mode == "" || mib <= 0 {
		t.Skip("run by TestChurnRSS")
	}
	const block, perExport = 10 << 10, 16
	n := mib << 20 / block
	liveMiB := 32
	if v, err := strconv.Atoi(os.Getenv("LLMSERVE_CHURN_LIVE_MIB")); err == nil {
		liveMiB = v
	}
	var live *node
	for range liveMiB << 20 / 64 {
		live = &node{next: live}
	}
	a := New(Options{})
	heap := make([][]byte, n)
	bufs := make([]Buf, n)
	start := time.Now()
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	gc0 := gcCycles()
	for i := range 3 * n { // fill, then churn twice over
		if i%perExport == 0 {
			// The engine's export of 16 blocks: Go-heap garbage once
			// copied into the cache.
			export = make([]byte, perExport*block)
			export[i%len(export)] = byte(i)
		}
		src := export[(i%perExport)*block : (i%perExport+1)*block]
		slot := i % n
		if mode == "hostmem" {
			a.Free(bufs[slot])
			b, err := a.Alloc(block)
			if err != nil {
				t.Fatal(err)
			}
			copy(b.Bytes(), src)
			bufs[slot] = b
		} else {
			heap[slot] = append(make([]byte, 0, block), src...)
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano()+ru.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	fmt.Printf("churn: cache %d MiB, peak RSS %d MiB, %d GC cycles, %d stores in %s wall, %s CPU (%.2f µs CPU per store)\n",
		mib, peakRSS()>>10, gcCycles()-gc0, 3*n, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond),
		float64(cpu.Microseconds())/float64(3*n))
	runtime.KeepAlive(heap)
	runtime.KeepAlive(live)
	for _, b := range bufs {
		a.Free(b)
	}
}

var export []byte

type node struct {
	next *node
	_    [56]byte
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakRSS is VmHWM in KiB.
func peakRSS() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kib
		}
	}
	return 0
}
