package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// object is one decoded document of a manifest.
type object struct {
	source string // file, or chart template, it came from
	kind   string
	name   string
	obj    any // *appsv1.Deployment, *corev1.Service, *LeaderWorkerSet, ...
}

// newObject returns an empty typed object for apiVersion and kind, or an
// error for a kind the manifests are not expected to hold.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet":
		return &LeaderWorkerSet{}, nil
	case "serving.kserve.io/v1alpha1 ServingRuntime":
		return &ServingRuntime{}, nil
	case "serving.kserve.io/v1beta1 InferenceService":
		return &InferenceService{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a kind these manifests use", apiVersion, kind)
}

// decodeAll splits a multi-document YAML stream and decodes each document
// strictly: an unknown or duplicated field is an error.
func decodeAll(source string, data []byte) ([]object, error) {
	var objs []object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // comments only
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		obj, err := newObject(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		// As the API server decodes: field names case-sensitive, unknown
		// and duplicated fields errors.
		strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
		if err == nil && len(strict) > 0 {
			err = errors.Join(strict...)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s %q: %w", source, tm.Kind, tm.Metadata.Name, err)
		}
		if tm.Metadata.Name == "" {
			return nil, fmt.Errorf("%s: %s without metadata.name", source, tm.Kind)
		}
		objs = append(objs, object{source: source, kind: tm.Kind, name: tm.Metadata.Name, obj: obj})
	}
	return objs, nil
}

// pod is a pod template found in the objects, with what the checks need.
type pod struct {
	where  string // "Deployment llmserve", "LeaderWorkerSet x leader", ...
	role   string // the subcommand the pod must run: serve, head or worker; "" any
	labels map[string]string
	spec   corev1.PodSpec
	grace  *int64
	kserve bool // a ServingRuntime's container: KServe's argument names
}

// command is an llmserve command line found in a container.
type command struct {
	sub    string
	flags  map[string]string // normalized name (dashes) -> value
	raw    []string          // flag names as written
	script string            // a shell wrapper's script, if any
}

// llmserveRE finds the command in a shell wrapper's script.
var llmserveRE = regexp.MustCompile(`/llmserve (serve|worker|head)((?: --[a-z0-9_-]+(?:=\S+)?)*)`)

// roleAssignRE finds a wrapper script's role=VALUE assignments.
var roleAssignRE = regexp.MustCompile(`\brole=([a-z]+)`)

// parseCommand reads the llmserve command line of a container: the image's
// entrypoint is the binary, so args start with the subcommand; or command
// is a /bin/sh -c wrapper that execs the binary with its own flags and the
// container's args ("$@"). Every flag must be written --name=value, so that
// no value can be mistaken for an argument.
func parseCommand(c corev1.Container) (command, error) {
	cmd := command{flags: map[string]string{}}
	args := c.Args
	switch {
	case len(c.Command) == 0:
		if len(args) == 0 {
			return cmd, errors.New("no args: the subcommand (serve, worker, head) must be the first")
		}
		cmd.sub, args = args[0], args[1:]
	case len(c.Command) >= 3 && c.Command[0] == "/bin/sh" && c.Command[1] == "-c":
		m := llmserveRE.FindStringSubmatch(c.Command[2])
		if m == nil || !strings.Contains(c.Command[2], `"$@"`) {
			return cmd, fmt.Errorf("command %q: want a script that execs /opt/llmserve/bin/llmserve SUBCOMMAND ... \"$@\"", c.Command[2])
		}
		cmd.sub, cmd.script = m[1], c.Command[2]
		args = append(strings.Fields(m[2]), args...)
	default:
		return cmd, fmt.Errorf("command %q: want none (the image's entrypoint) or a /bin/sh -c wrapper", c.Command)
	}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			return cmd, fmt.Errorf("argument %q: want --flag=value", a)
		}
		cmd.raw = append(cmd.raw, name)
		cmd.flags[strings.ReplaceAll(name, "_", "-")] = strings.Trim(value, `"`)
	}
	return cmd, nil
}

func (c command) value(flag, def string) string {
	if v, ok := c.flags[flag]; ok {
		return v
	}
	return def
}

// podsOf lists the pod templates of the objects (a ServingRuntime's
// containers with the InferenceServices that use it).
func podsOf(objs []object) ([]pod, []error) {
	var pods []pod
	var errs []error
	runtimes := map[string]*ServingRuntime{}
	for _, o := range objs {
		if sr, ok := o.obj.(*ServingRuntime); ok {
			runtimes[sr.Name] = sr
		}
	}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			pods = append(pods, pod{where: "Deployment " + v.Name, labels: v.Spec.Template.Labels,
				spec: v.Spec.Template.Spec, grace: v.Spec.Template.Spec.TerminationGracePeriodSeconds})
			if sel := v.Spec.Selector; sel == nil || !subset(sel.MatchLabels, v.Spec.Template.Labels) {
				errs = append(errs, fmt.Errorf("Deployment %s: selector does not match the template's labels", v.Name))
			}
		case *LeaderWorkerSet:
			t := v.Spec.LeaderWorkerTemplate
			if t.LeaderTemplate == nil {
				errs = append(errs, fmt.Errorf("LeaderWorkerSet %s: no leaderTemplate (the head)", v.Name))
				continue
			}
			lws := map[string]string{"leaderworkerset.sigs.k8s.io/name": v.Name}
			pods = append(pods,
				pod{where: "LeaderWorkerSet " + v.Name + " leader", role: "head",
					labels: merge(t.LeaderTemplate.Labels, lws, map[string]string{"leaderworkerset.sigs.k8s.io/worker-index": "0"}),
					spec:   t.LeaderTemplate.Spec, grace: t.LeaderTemplate.Spec.TerminationGracePeriodSeconds},
				pod{where: "LeaderWorkerSet " + v.Name + " worker", role: "worker",
					labels: merge(t.WorkerTemplate.Labels, lws, map[string]string{"leaderworkerset.sigs.k8s.io/worker-index": "1"}),
					spec:   t.WorkerTemplate.Spec, grace: t.WorkerTemplate.Spec.TerminationGracePeriodSeconds})
		case *InferenceService:
			m := v.Spec.Predictor.Model
			if m == nil || m.Runtime == nil {
				errs = append(errs, fmt.Errorf("InferenceService %s: predictor.model.runtime not set", v.Name))
				continue
			}
			sr, ok := runtimes[*m.Runtime]
			if !ok {
				errs = append(errs, fmt.Errorf("InferenceService %s: runtime %q is not a ServingRuntime of these manifests", v.Name, *m.Runtime))
				continue
			}
			if !slices.ContainsFunc(sr.Spec.SupportedModelFormats, func(f SupportedModelFormat) bool { return f.Name == m.ModelFormat.Name }) {
				errs = append(errs, fmt.Errorf("InferenceService %s: modelFormat %q is not one of runtime %s's", v.Name, m.ModelFormat.Name, sr.Name))
			}
			spec := corev1.PodSpec{Containers: slices.Clone(sr.Spec.Containers)}
			for i, c := range spec.Containers {
				if c.Name == "kserve-container" {
					// KServe appends the predictor's args to the runtime's.
					spec.Containers[i].Args = append(slices.Clone(c.Args), m.Args...)
				}
			}
			pods = append(pods, pod{where: "InferenceService " + v.Name + " (runtime " + sr.Name + ")", role: "serve",
				spec: spec, grace: v.Spec.Predictor.TerminationGracePeriodSeconds, kserve: true})
		}
	}
	return pods, errs
}

// check returns every problem of a set of manifests deployed together.
func check(objs []object, fs flagSets) []error {
	pods, errs := podsOf(objs)
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	headless := map[string]int32{} // headless Service -> its worker port
	for _, o := range objs {
		if s, ok := o.obj.(*corev1.Service); ok && s.Spec.ClusterIP == corev1.ClusterIPNone {
			for _, p := range s.Spec.Ports {
				if p.Name == "worker" {
					headless[s.Name] = p.Port
				}
			}
			if _, ok := headless[s.Name]; !ok {
				add("Service %s: headless, for worker discovery, without a port named worker", s.Name)
			}
		}
	}

	for _, p := range pods {
		n := 0
		for _, c := range p.spec.Containers {
			if !strings.Contains(c.Image, "llmserve") {
				continue
			}
			n++
			for _, e := range checkContainer(p, c, fs, headless) {
				add("%s container %s: %v", p.where, c.Name, e)
			}
		}
		if n == 0 {
			add("%s: no llmserve container", p.where)
		}
		if !nonRoot(p.spec) {
			add("%s: runAsNonRoot not set on the pod or its llmserve containers", p.where)
		}
	}

	for _, o := range objs {
		errs = append(errs, checkNames(o)...)
	}
	for _, p := range pods {
		for k, v := range p.labels {
			for _, e := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				add("%s: label %s=%s: %s", p.where, k, v, e)
			}
		}
		for _, c := range p.spec.Containers {
			for _, e := range validation.IsDNS1123Label(c.Name) {
				add("%s: container name %q: %s", p.where, c.Name, e)
			}
			for _, cp := range c.Ports {
				for _, e := range validation.IsValidPortName(cp.Name) {
					add("%s container %s: port name %q: %s", p.where, c.Name, cp.Name, e)
				}
			}
		}
	}

	for _, o := range objs {
		switch v := o.obj.(type) {
		case *corev1.Service:
			errs = append(errs, checkService(v, pods)...)
		case *LeaderWorkerSet:
			errs = append(errs, checkLWS(v)...)
		case *ServingRuntime:
			errs = append(errs, checkRuntime(v)...)
		case *autoscalingv2.HorizontalPodAutoscaler:
			errs = append(errs, checkHPA(v, objs)...)
		}
	}
	return errs
}

func checkContainer(p pod, c corev1.Container, fs flagSets, headless map[string]int32) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	cmd, err := parseCommand(c)
	if err != nil {
		return []error{err}
	}
	if _, ok := fs.bySub[cmd.sub]; !ok {
		return []error{fmt.Errorf("subcommand %q: want serve, worker or head", cmd.sub)}
	}
	if p.role != "" && cmd.sub != p.role {
		add("runs llmserve %s, want llmserve %s", cmd.sub, p.role)
	}
	for _, name := range cmd.raw {
		if !fs.known(cmd.sub, strings.ReplaceAll(name, "_", "-")) {
			add("--%s is not a flag of llmserve %s (its flags: %s)", name, cmd.sub, fs.list(cmd.sub))
		}
	}
	if p.kserve {
		for _, want := range []string{"model_name", "model_dir", "http_port", "grpc_port"} {
			if !slices.Contains(cmd.raw, want) {
				add("KServe's argument --%s missing", want)
			}
		}
		if c.Name != "kserve-container" {
			add("a ServingRuntime's model container must be named kserve-container")
		}
	}
	if h := cmd.value("host", ""); h != "0.0.0.0" {
		add("--host=%q: a container must listen on every interface (--host=0.0.0.0)", h)
	}
	if cmd.sub == "worker" {
		roles := []string{cmd.value("role", "both")}
		if roles[0] == "$role" {
			// Set by the wrapper's script: every value it assigns.
			roles = roles[:0]
			for _, m := range roleAssignRE.FindAllStringSubmatch(cmd.script, -1) {
				roles = append(roles, m[1])
			}
		}
		for _, r := range roles {
			if !slices.Contains(workerRoles, r) {
				add("--role=%s: want one of %v", r, workerRoles)
			}
		}
		if len(roles) == 0 {
			add("--role=$role, and the script assigns no role")
		}
	}
	if v, ok := cmd.flags["workers-dns"]; ok {
		host, port, _ := strings.Cut(v, ":")
		if hp, ok := headless[host]; !ok {
			add("--workers-dns=%s: %q is not a headless Service of these manifests", v, host)
		} else if strconv.Itoa(int(hp)) != port {
			add("--workers-dns=%s: the Service's worker port is %d", v, hp)
		}
	}

	// Ports: the container's named ports are the ports the flags set.
	want := map[string]string{"http": cmd.value("http-port", "8080"), "grpc": cmd.value("grpc-port", "8081")}
	if cmd.sub == "worker" {
		want["worker"] = cmd.value("worker-port", "8090")
	}
	ports := map[string]int32{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	for name, flag := range want {
		if got, ok := ports[name]; !ok {
			add("no container port named %s (port %s)", name, flag)
		} else if strconv.Itoa(int(got)) != flag {
			add("container port %s is %d, the flag says %s", name, got, flag)
		}
	}
	if _, ok := ports["worker"]; ok && cmd.sub != "worker" {
		add("a port named worker on llmserve %s, which serves none", cmd.sub)
	}

	// Probes: readiness on /v2/health/ready, liveness (and startup) on
	// /health, all on the HTTP port.
	probe := func(kind string, pr *corev1.Probe, path string, required bool) {
		if pr == nil {
			if required {
				add("no %s probe", kind)
			}
			return
		}
		g := pr.HTTPGet
		if g == nil {
			add("%s probe: want httpGet %s", kind, path)
			return
		}
		if g.Path != path {
			add("%s probe: path %s, want %s", kind, g.Path, path)
		}
		port := g.Port.String()
		if g.Port.Type == intstr.String {
			if v, ok := ports[g.Port.StrVal]; ok {
				port = strconv.Itoa(int(v))
			}
		}
		if port != want["http"] {
			add("%s probe: port %s, the HTTP port is %s", kind, g.Port.String(), want["http"])
		}
	}
	probe("readiness", c.ReadinessProbe, "/v2/health/ready", true)
	// A model server is alive while its engine is (/health); the head's
	// /health is its readiness (a healthy worker exists), and restarting a
	// head brings no worker back, so it is alive while it answers.
	live := "/health"
	if cmd.sub == "head" {
		live = "/v2/health/live"
	}
	probe("liveness", c.LivenessProbe, live, true)
	probe("startup", c.StartupProbe, live, false)

	// Drain: the grace period covers the preStop pause and the shutdown
	// timeout, with a margin of at most a minute.
	shutdown, err := time.ParseDuration(cmd.value("shutdown-timeout", "30s"))
	if err != nil {
		add("--shutdown-timeout: %v", err)
	}
	var sleep time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if s := c.Lifecycle.PreStop.Sleep; s != nil {
			sleep = time.Duration(s.Seconds) * time.Second
		} else {
			add("preStop: want a sleep action (the image has no shell tools to rely on)")
		}
	}
	if p.grace == nil {
		add("terminationGracePeriodSeconds not set (Kubernetes' default 30s is not longer than the drain, %v)", shutdown+sleep)
	} else {
		g := time.Duration(*p.grace) * time.Second
		if need := shutdown + sleep; g <= need || g > need+time.Minute {
			add("terminationGracePeriodSeconds %d: want a little more than the preStop pause and --shutdown-timeout (%v)", *p.grace, need)
		}
	}
	return errs
}

// checkNames: object names as the API server requires them (a Service's
// name is a DNS label; the others' DNS subdomains, and short enough for
// the pods' host names the controllers derive from them).
func checkNames(o object) []error {
	var errs []error
	var problems []string
	switch o.obj.(type) {
	case *corev1.Service:
		problems = validation.IsDNS1035Label(o.name)
	default:
		problems = validation.IsDNS1123Label(o.name)
		if len(o.name) > 40 {
			problems = append(problems, "longer than 40 characters: the pods' names and host names add to it")
		}
	}
	for _, p := range problems {
		errs = append(errs, fmt.Errorf("%s %q: name: %s", o.kind, o.name, p))
	}
	return errs
}

func checkService(s *corev1.Service, pods []pod) []error {
	var errs []error
	if len(s.Spec.Selector) == 0 {
		return []error{fmt.Errorf("Service %s: no selector", s.Name)}
	}
	var matched []pod
	for _, p := range pods {
		if subset(s.Spec.Selector, p.labels) {
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		return []error{fmt.Errorf("Service %s: selector %v matches no pod template of these manifests", s.Name, s.Spec.Selector)}
	}
	for _, sp := range s.Spec.Ports {
		for _, p := range matched {
			found := false
			for _, c := range p.spec.Containers {
				for _, cp := range c.Ports {
					if (sp.TargetPort.Type == intstr.String && cp.Name == sp.TargetPort.StrVal) ||
						(sp.TargetPort.Type == intstr.Int && cp.ContainerPort == sp.TargetPort.IntVal) {
						found = true
					}
				}
			}
			if !found {
				errs = append(errs, fmt.Errorf("Service %s port %s: target port %s is not a port of %s", s.Name, sp.Name, sp.TargetPort.String(), p.where))
			}
		}
	}
	return errs
}

func checkLWS(l *LeaderWorkerSet) []error {
	var errs []error
	add := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("LeaderWorkerSet %s: "+format, append([]any{l.Name}, a...)...))
	}
	t := l.Spec.LeaderWorkerTemplate
	if !slices.Contains(lwsStartupPolicies, l.Spec.StartupPolicy) {
		add("startupPolicy %q: want one of %v", l.Spec.StartupPolicy, lwsStartupPolicies)
	}
	if l.Spec.StartupPolicy != "LeaderCreated" {
		add("startupPolicy %q: the head is ready only once a worker is, so workers must not wait for it (LeaderCreated)", l.Spec.StartupPolicy)
	}
	if t.RestartPolicy != "" && !slices.Contains(lwsRestartPolicies, t.RestartPolicy) {
		add("restartPolicy %q: want one of %v", t.RestartPolicy, lwsRestartPolicies)
	}
	if t.RestartPolicy != "None" {
		add("restartPolicy %q: a worker's death must not restart its group (None): the head moves its streams", t.RestartPolicy)
	}
	if t.Size == nil || *t.Size < 2 {
		add("size: want a head and at least one worker")
		return errs
	}
	for _, c := range t.WorkerTemplate.Spec.Containers {
		if len(c.Command) < 3 {
			continue
		}
		// The role by index: PREFILL_WORKERS prefill workers, the rest decode.
		for _, e := range c.Env {
			if e.Name != "PREFILL_WORKERS" {
				continue
			}
			n, err := strconv.Atoi(e.Value)
			if err != nil || n < 1 || n >= int(*t.Size)-1 {
				add("PREFILL_WORKERS=%q: want 1 to size-2 (%d), leaving decode workers", e.Value, *t.Size-2)
			}
		}
		if !strings.Contains(c.Command[2], "$LWS_WORKER_INDEX") || !strings.Contains(c.Command[2], "$PREFILL_WORKERS") {
			add("worker script: the role must come from LWS_WORKER_INDEX and PREFILL_WORKERS")
		}
	}
	return errs
}

// checkHPA: the target is a scalable object of the set, the bounds are
// ordered, and a pods metric is one llmserve exports.
func checkHPA(h *autoscalingv2.HorizontalPodAutoscaler, objs []object) []error {
	var errs []error
	ref := h.Spec.ScaleTargetRef
	if !slices.ContainsFunc(objs, func(o object) bool {
		_, scalable := o.obj.(*appsv1.Deployment)
		if _, ok := o.obj.(*LeaderWorkerSet); ok {
			scalable = true
		}
		return scalable && o.kind == ref.Kind && o.name == ref.Name
	}) {
		errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: target %s %s is not a Deployment or LeaderWorkerSet of these manifests", h.Name, ref.Kind, ref.Name))
	}
	if h.Spec.MinReplicas != nil && *h.Spec.MinReplicas > h.Spec.MaxReplicas {
		errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: minReplicas %d > maxReplicas %d", h.Name, *h.Spec.MinReplicas, h.Spec.MaxReplicas))
	}
	for _, m := range h.Spec.Metrics {
		if m.Pods != nil && !slices.Contains(exportedGauges, m.Pods.Metric.Name) {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: metric %s: llmserve exports %v", h.Name, m.Pods.Metric.Name, exportedGauges))
		}
	}
	return errs
}

// exportedGauges: the per-process gauges an autoscaler may use (vLLM's
// names; metrics/).
var exportedGauges = []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"}

func checkRuntime(sr *ServingRuntime) []error {
	var errs []error
	var formats []string
	for _, f := range sr.Spec.SupportedModelFormats {
		formats = append(formats, f.Name)
	}
	for _, want := range []string{"gguf", "onnx"} {
		if !slices.Contains(formats, want) {
			errs = append(errs, fmt.Errorf("ServingRuntime %s: supportedModelFormats %v lacks %s", sr.Name, formats, want))
		}
	}
	for _, p := range sr.Spec.ProtocolVersions {
		if !slices.Contains(kserveProtocols, p) {
			errs = append(errs, fmt.Errorf("ServingRuntime %s: protocolVersion %q: want one of %v", sr.Name, p, kserveProtocols))
		}
	}
	for _, want := range []string{"v1", "v2", "grpc-v2"} {
		if !slices.Contains(sr.Spec.ProtocolVersions, want) {
			errs = append(errs, fmt.Errorf("ServingRuntime %s: protocolVersions %v lacks %s", sr.Name, sr.Spec.ProtocolVersions, want))
		}
	}
	return errs
}

func nonRoot(spec corev1.PodSpec) bool {
	if sc := spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot {
		return true
	}
	for _, c := range spec.Containers {
		if strings.Contains(c.Image, "llmserve") && (c.SecurityContext == nil || c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot) {
			return false
		}
	}
	return len(spec.Containers) > 0
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
