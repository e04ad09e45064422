package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
)

const chartDir = "helm/llmserve"

// chartCases: the values each mode is rendered with, and the kinds it gives.
var chartCases = []struct {
	name   string
	values map[string]any
	kinds  []string
}{
	{"single", map[string]any{"mode": "single"}, []string{"Deployment", "Service"}},
	{"single-gpu", map[string]any{"mode": "single", "gpu": map[string]any{"enabled": true, "nodeSelector": map[string]any{"nvidia.com/gpu.present": "true"}}}, []string{"Deployment", "Service"}},
	{"kserve", map[string]any{"mode": "kserve"}, []string{"ServingRuntime", "InferenceService"}},
	{"kserve-gpu", map[string]any{"mode": "kserve", "gpu": map[string]any{"enabled": true, "count": 2}}, []string{"ServingRuntime", "InferenceService"}},
	{"lws", map[string]any{"mode": "lws", "replicas": 2, "workers": 3}, []string{"LeaderWorkerSet", "Service"}},
	{"lws-gpu", map[string]any{"mode": "lws", "gpu": map[string]any{"enabled": true, "tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}}}, []string{"LeaderWorkerSet", "Service"}},
	{"pd-lws", map[string]any{"mode": "pd"}, []string{"LeaderWorkerSet", "Service"}},
	{"pd-dns", map[string]any{"mode": "pd", "pd": map[string]any{"discovery": "dns", "prefill": 2, "decode": 3}}, []string{"Deployment", "Deployment", "Deployment", "Service", "Service"}},
	{"extra-args", map[string]any{"mode": "single", "serve": map[string]any{"extraArgs": []any{"--reasoning-parser=deepseek_r1", "--max-waiting=64"}}}, []string{"Deployment", "Service"}},
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// render is `helm template`: the chart rendered client-side, no cluster.
func render(c *chart.Chart, values map[string]any) (string, error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = "demo"
	install.Namespace = "default"
	install.DisableHooks = true
	rel, err := install.Run(c, values)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// TestChartTemplate renders the chart in every mode and checks the
// documents as the static manifests are checked.
func TestChartTemplate(t *testing.T) {
	fs := loadFlags(t)
	c := loadChart(t)
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(c, tc.values)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			objs, err := decodeAll("chart "+tc.name, []byte(out))
			if err != nil {
				t.Fatalf("decode: %v\n%s", err, out)
			}
			// Helm orders documents by kind (its install order).
			got, want := kinds(objs), slices.Clone(tc.kinds)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("kinds %v, want %v", got, want)
			}
			for _, err := range check(objs, fs) {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("rendered:\n%s", out)
			}
			checkGPU(t, tc.values, objs)
		})
	}
}

// checkGPU: with gpu.enabled every model container asks for the GPUs, runs
// the CUDA image and offloads every layer; without it none does.
func checkGPU(t *testing.T, values map[string]any, objs []object) {
	t.Helper()
	gpu, _ := values["gpu"].(map[string]any)
	enabled, _ := gpu["enabled"].(bool)
	count := 1
	if n, ok := gpu["count"].(int); ok {
		count = n
	}
	pods, errs := podsOf(objs)
	for _, e := range errs {
		t.Error(e)
	}
	for _, p := range pods {
		for _, c := range p.spec.Containers {
			cmd, err := parseCommand(c)
			if err != nil || cmd.sub == "head" {
				continue
			}
			q, asks := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
			layers := strings.Join(c.Args, " ")
			if enabled {
				if !asks || q.Value() != int64(count) {
					t.Errorf("%s %s: limits %v, want nvidia.com/gpu: %d", p.where, c.Name, c.Resources.Limits, count)
				}
				if !strings.HasSuffix(c.Image, ":cuda") {
					t.Errorf("%s %s: image %s, want the CUDA image", p.where, c.Name, c.Image)
				}
				if !strings.Contains(layers, "--n-gpu-layers=-1") && !p.kserve {
					t.Errorf("%s %s: no --n-gpu-layers=-1 in %v", p.where, c.Name, c.Args)
				}
			} else if asks || strings.Contains(layers, "--n-gpu-layers") {
				t.Errorf("%s %s: GPU settings without gpu.enabled", p.where, c.Name)
			}
		}
	}
}

// TestChartLint is `helm lint --strict` in every mode: no error, no warning.
func TestChartLint(t *testing.T) {
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			l := lint.All(chartDir, tc.values, "default", true)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Error(m)
				}
			}
		})
	}
}

// TestChartRejectsBadValues: values.schema.json stops what would render a
// broken deployment.
func TestChartRejectsBadValues(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"unknown mode", map[string]any{"mode": "cluster"}, "mode"},
		{"unknown discovery", map[string]any{"mode": "pd", "pd": map[string]any{"discovery": "consul"}}, "discovery"},
		{"no workers", map[string]any{"mode": "lws", "workers": 0}, "workers"},
		{"zero drain", map[string]any{"drain": map[string]any{"shutdownTimeoutSeconds": 0}}, "shutdownTimeoutSeconds"},
		{"model name", map[string]any{"model": map[string]any{"name": "My Model"}}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(c, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render error %v, want one about %q", err, tc.want)
			}
		})
	}
}

// TestChartDefaults: values.yaml's defaults agree with the binary's (ports
// and drain) and render the single mode.
func TestChartDefaults(t *testing.T) {
	c := loadChart(t)
	v, err := chartutil.CoalesceValues(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v["mode"] != "single" {
		t.Errorf("mode %v, want single by default", v["mode"])
	}
	drain, _ := v["drain"].(map[string]any)
	keys := slices.Sorted(maps.Keys(drain))
	if fmt.Sprint(drain["shutdownTimeoutSeconds"]) != "30" {
		t.Errorf("drain.shutdownTimeoutSeconds %v (of %v), want serve's --shutdown-timeout default, 30", drain["shutdownTimeoutSeconds"], keys)
	}
}
