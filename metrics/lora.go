package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/scheduler"
)

// loraInfo is vLLM's vllm:lora_requests_info: a gauge whose labels carry
// the adapters of the running and the waiting requests (comma-separated)
// and max_lora, and whose value is the time of the reading (vLLM sets it
// to the current time on every update; here it is read at scrape time).
type loraInfo struct {
	desc  *prometheus.Desc
	stats func() scheduler.Stats
	now   func() time.Time
}

// NewLoRA registers vllm:lora_requests_info for a model that serves LoRA
// adapters; stats is read at scrape time.
func NewLoRA(reg prometheus.Registerer, model string, stats func() scheduler.Stats) (prometheus.Collector, error) {
	c := &loraInfo{
		desc: prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
			[]string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"}, prometheus.Labels{"model_name": model}),
		stats: stats,
		now:   time.Now,
	}
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *loraInfo) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *loraInfo) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	t := float64(c.now().UnixNano()) / 1e9
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, t,
		strconv.Itoa(s.MaxLoRAs), strings.Join(s.WaitingLoRAs, ","), strings.Join(s.RunningLoRAs, ","))
}
