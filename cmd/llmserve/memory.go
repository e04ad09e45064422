package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// parseKVMemory reads --kv-cache-memory: a size, or auto. With KV in host
// memory (paged: it follows the tokens in use) auto is a quarter of host,
// the machine's memory or the container's limit, at least 1 GiB; with KV on
// a GPU (not paged, and host memory says nothing of the GPU's) it is 1 GiB.
func parseKVMemory(s string, gpu bool, host int64) (int64, error) {
	if strings.TrimSpace(s) != "auto" {
		return parseBytes(s)
	}
	const floor = 1 << 30
	if gpu || host <= 0 {
		return floor, nil
	}
	return max(floor, host/4), nil
}

// hostMemory is the memory this process may use: the machine's
// (/proc/meminfo MemTotal), or less when a cgroup limits it; 0 when
// neither can be read.
func hostMemory() int64 {
	total := memTotal()
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && (total == 0 || v < total) {
			total = v
		}
	}
	return total
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
