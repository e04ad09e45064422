package router

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseWorkers splits --workers (host:port,...) and checks every address.
func ParseWorkers(list string) ([]string, error) {
	var out []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("--workers: %q is not host:port", a)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--workers: no address in %q (want host:port,...)", list)
	}
	return out, nil
}

// Resolver looks up a host's addresses (net.DefaultResolver.LookupHost).
type Resolver func(ctx context.Context, host string) ([]string, error)

// WatchDNS sets the router's workers to every address name resolves to
// (at port), now and every interval until ctx ends: a Kubernetes
// headless service lists its ready pods so. A failed lookup keeps the
// last set.
func (r *Router) WatchDNS(ctx context.Context, nameport string, interval time.Duration, resolve Resolver) error {
	host, port, err := net.SplitHostPort(nameport)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("--workers-dns: %q is not name:port", nameport)
	}
	if resolve == nil {
		resolve = net.DefaultResolver.LookupHost
	}
	if interval <= 0 {
		interval = 10 * time.Second
	}
	lookup := func() {
		lctx, cancel := context.WithTimeout(ctx, r.opts.RPCTimeout)
		ips, err := resolve(lctx, host)
		cancel()
		if err != nil {
			r.log.Warn("--workers-dns: lookup failed; keeping the workers known", "name", host, "err", err)
			return
		}
		addrs := make([]string, 0, len(ips))
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
		slices.Sort(addrs)
		r.SetWorkers(slices.Compact(addrs))
	}
	lookup()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := r.opts.Clock.NewTimer(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				lookup()
				t.Reset(interval)
			}
		}
	}()
	return nil
}

// LWSWorkers derives the workers of a LeaderWorkerSet group from the
// leader's environment: LWS_LEADER_ADDRESS is
// <lws>-<group>.<rest> (the leader pod's DNS name) and LWS_GROUP_SIZE the
// pods in the group; worker i (1..size-1) is <lws>-<group>-<i>.<rest>.
// ok is false when the variables are not set.
func LWSWorkers(getenv func(string) string, port int) (addrs []string, ok bool, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	leader, size := getenv("LWS_LEADER_ADDRESS"), getenv("LWS_GROUP_SIZE")
	if leader == "" && size == "" {
		return nil, false, nil
	}
	n, err := strconv.Atoi(size)
	if err != nil || n < 2 {
		return nil, true, fmt.Errorf("LWS_GROUP_SIZE=%q: want the group's pod count, at least 2 (the head and a worker)", size)
	}
	name, rest, _ := strings.Cut(leader, ".")
	if name == "" {
		return nil, true, fmt.Errorf("LWS_LEADER_ADDRESS=%q: want <lws>-<group>.<service> and the rest of the pod's DNS name", leader)
	}
	for i := 1; i < n; i++ {
		host := fmt.Sprintf("%s-%d", name, i)
		if rest != "" {
			host += "." + rest
		}
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return addrs, true, nil
}
