package workloads

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
)

// DefaultSeed is the seed of the workloads the project's figures were measured on.
const DefaultSeed = 42

const (
	schedulerName = "tailor-scheduler"
	zoneKey       = "topology.kubernetes.io/zone"
	hostnameKey   = "kubernetes.io/hostname"
	capacityType  = "karpenter.sh/capacity-type"
	archKey       = "kubernetes.io/arch"
)

// Write writes a workload as a v1 List in JSON: one EC2NodeClass, the NodePools the shape
// needs and that many pending pods of the shape, drawn from the seed. The same arguments
// give the same bytes, those the Python generator the workloads were first made by wrote
// (`generate.py SHAPE PODS --seed SEED`).
func Write(w io.Writer, shape string, pods int, seed int64) error {
	rng := newPythonRandom(seed)
	var items []object
	switch shape {
	case "diverse":
		items = diverse(pods, rng)
	case "webmix":
		items = webmix(pods, rng)
	case "batch":
		items = batch(pods, rng)
	case "tiny":
		items = tiny(pods, rng)
	default:
		return fmt.Errorf("unknown workload shape %q; one of: %s", shape, strings.Join(Shapes, ", "))
	}
	bw := bufio.NewWriter(w)
	if err := writeValue(bw, object{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}); err != nil {
		return err
	}
	if err := bw.WriteByte('\n'); err != nil {
		return err
	}
	return bw.Flush()
}

// diverse is five equal classes of pods: plain, zonal topology spread, hostname topology
// spread, zonal self pod-affinity and hostname self anti-affinity, on one on-demand
// NodePool.
func diverse(n int, rng *pythonRandom) []object {
	items := []object{
		nodeClass(),
		nodePool("default", []object{req(capacityType, "In", "on-demand"), req("kubernetes.io/os", "In", "linux")}, nil, 0, nil),
	}
	cpus := []string{"100m", "250m", "500m", "1000m", "1500m"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"}
	for i := range n {
		class := i % 5
		labels := object{{"class", fmt.Sprintf("c%d", class)}}
		var extra object
		switch class {
		case 1:
			extra = object{{"topologySpreadConstraints", []object{spread(zoneKey, labels)}}}
		case 2:
			extra = object{{"topologySpreadConstraints", []object{spread(hostnameKey, labels)}}}
		case 3:
			extra = object{{"affinity", object{{"podAffinity", requiredTerm(zoneKey, labels)}}}}
		case 4:
			extra = object{{"affinity", object{{"podAntiAffinity", requiredTerm(hostnameKey, labels)}}}}
		}
		cpu := choice(rng, cpus)
		mem := choice(rng, mems)
		items = append(items, pod(fmt.Sprintf("diverse-%06d", i), labels, cpu, mem, extra, 0))
	}
	return items
}

// webmix is Deployments of identical replicas: web (small, zone-spread), JVM services
// (memory heavy), workers (CPU heavy, preferring spot), arm64 and GPU inference pods, on a
// spot and on-demand general NodePool and a tainted GPU NodePool.
func webmix(n int, rng *pythonRandom) []object {
	items := []object{
		nodeClass(),
		nodePool("general", []object{
			req(capacityType, "In", "spot", "on-demand"),
			req("karpenter.k8s.aws/instance-category", "In", "c", "m", "r"),
			req("karpenter.k8s.aws/instance-generation", "Gt", "4"),
			req(archKey, "In", "amd64", "arm64"),
		}, nil, 0, object{{"cpu", "20000"}}),
		nodePool("gpu", []object{
			req(capacityType, "In", "on-demand"),
			req("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "nvidia"),
		}, []object{{{"key", "nvidia.com/gpu"}, {"value", "true"}, {"effect", "NoSchedule"}}}, 10, nil),
	}
	kinds, weights := []string{"web", "jvm", "worker", "arm", "gpu"}, []int{40, 20, 25, 12, 3}
	sizes := []int{2, 3, 5, 8, 12, 20, 40}
	for made, d := 0, 0; made < n; d++ {
		kind := weightedChoice(rng, kinds, weights)
		replicas := min(n-made, choice(rng, sizes))
		labels := object{{"app", fmt.Sprintf("%s-%d", kind, d)}}
		var cpu, mem string
		var extra object
		gpu := 0
		switch kind {
		case "web":
			cpu = choice(rng, []string{"100m", "200m", "250m", "500m"})
			mem = choice(rng, []string{"128Mi", "256Mi", "512Mi"})
			extra = object{
				{"topologySpreadConstraints", []object{spread(zoneKey, labels)}},
				{"nodeSelector", object{{archKey, "amd64"}}},
			}
		case "jvm":
			cpu = choice(rng, []string{"500m", "1", "2"})
			mem = choice(rng, []string{"2Gi", "4Gi", "6Gi", "8Gi"})
			extra = object{{"nodeSelector", object{{archKey, "amd64"}, {capacityType, "on-demand"}}}}
		case "worker":
			cpu = choice(rng, []string{"1", "2", "3", "4"})
			mem = choice(rng, []string{"1Gi", "2Gi", "3Gi"})
			preference := object{{"matchExpressions", []object{req(capacityType, "In", "spot")}}}
			extra = object{{"affinity", object{{"nodeAffinity", object{
				{"preferredDuringSchedulingIgnoredDuringExecution", []object{{{"weight", 50}, {"preference", preference}}}},
			}}}}}
		case "arm":
			cpu = choice(rng, []string{"250m", "500m", "1"})
			mem = choice(rng, []string{"512Mi", "1Gi", "2Gi"})
			extra = object{{"nodeSelector", object{{archKey, "arm64"}}}}
		default:
			cpu = choice(rng, []string{"2", "4", "8"})
			mem = choice(rng, []string{"8Gi", "16Gi", "30Gi"})
			gpu = 1
			extra = object{{"tolerations", []object{{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}}}
		}
		for r := range replicas {
			items = append(items, pod(fmt.Sprintf("%s-%d-%d", kind, d, r), labels, cpu, mem, extra, gpu))
		}
		made += replicas
	}
	return items
}

// batch is large CPU pods (2 to 32 vCPU) tolerating the taint of a spot-only batch
// NodePool.
func batch(n int, rng *pythonRandom) []object {
	items := []object{
		nodeClass(),
		nodePool("batch", []object{
			req(capacityType, "In", "spot"),
			req("karpenter.k8s.aws/instance-category", "In", "c", "m"),
			req(archKey, "In", "amd64"),
		}, []object{{{"key", "batch-only"}, {"value", "true"}, {"effect", "NoSchedule"}}}, 0, nil),
	}
	extra := object{{"tolerations", []object{{{"key", "batch-only"}, {"operator", "Equal"}, {"value", "true"}, {"effect", "NoSchedule"}}}}}
	for i := range n {
		cpu := choice(rng, []int{2, 4, 8, 16, 32})
		mem := fmt.Sprintf("%dGi", cpu*choice(rng, []int{2, 4}))
		items = append(items, pod(fmt.Sprintf("batch-%06d", i), object{{"job", fmt.Sprintf("j%d", i/50)}}, strconv.Itoa(cpu), mem, extra, 0))
	}
	return items
}

// tiny is very small pods (10 to 50m CPU, 16 to 64Mi), bound by max-pods rather than CPU or
// memory.
func tiny(n int, rng *pythonRandom) []object {
	items := []object{
		nodeClass(),
		nodePool("default", []object{req(capacityType, "In", "on-demand"), req(archKey, "In", "amd64")}, nil, 0, nil),
	}
	for i := range n {
		cpu := choice(rng, []string{"10m", "25m", "50m"})
		mem := choice(rng, []string{"16Mi", "32Mi", "64Mi"})
		items = append(items, pod(fmt.Sprintf("tiny-%06d", i), object{{"app", fmt.Sprintf("t%d", i%7)}}, cpu, mem, nil, 0))
	}
	return items
}

func nodeClass() object {
	discovery := []object{{{"tags", object{{"karpenter.sh/discovery", "demo"}}}}}
	return object{
		{"apiVersion", "karpenter.k8s.aws/v1"},
		{"kind", "EC2NodeClass"},
		{"metadata", object{{"name", "default"}}},
		{"spec", object{
			{"amiSelectorTerms", []object{{{"alias", "al2023@latest"}}}},
			{"role", "TailorNodeRole"},
			{"subnetSelectorTerms", discovery},
			{"securityGroupSelectorTerms", discovery},
		}},
	}
}

// nodePool returns a NodePool of the default EC2NodeClass; taints, weight and limits are
// left out when empty.
func nodePool(name string, reqs, taints []object, weight int, limits object) object {
	template := object{
		{"nodeClassRef", object{{"group", "karpenter.k8s.aws"}, {"kind", "EC2NodeClass"}, {"name", "default"}}},
		{"requirements", reqs},
	}
	if len(taints) > 0 {
		template = append(template, member{"taints", taints})
	}
	spec := object{
		{"template", object{{"spec", template}}},
		{"disruption", object{{"consolidationPolicy", "WhenEmptyOrUnderutilized"}, {"consolidateAfter", "30s"}}},
	}
	if weight != 0 {
		spec = append(spec, member{"weight", weight})
	}
	if len(limits) > 0 {
		spec = append(spec, member{"limits", limits})
	}
	return object{{"apiVersion", "karpenter.sh/v1"}, {"kind", "NodePool"}, {"metadata", object{{"name", name}}}, {"spec", spec}}
}

func req(key, operator string, values ...string) object {
	r := object{{"key", key}, {"operator", operator}}
	if values != nil {
		r = append(r, member{"values", values})
	}
	return r
}

// pod returns a pending pod of one pause container; extra's members join its spec, and
// gpu GPUs are requested and limited when not zero.
func pod(name string, labels object, cpu, mem string, extra object, gpu int) object {
	requests := object{{"cpu", cpu}, {"memory", mem}}
	limits := object{}
	if gpu != 0 {
		requests = append(requests, member{"nvidia.com/gpu", strconv.Itoa(gpu)})
		limits = object{{"nvidia.com/gpu", strconv.Itoa(gpu)}}
	}
	container := object{
		{"name", "app"},
		{"image", "registry.k8s.io/pause:3.10"},
		{"resources", object{{"requests", requests}, {"limits", limits}}},
	}
	spec := object{{"schedulerName", schedulerName}, {"containers", []object{container}}}
	spec.update(extra)
	return object{
		{"apiVersion", "v1"},
		{"kind", "Pod"},
		{"metadata", object{{"name", name}, {"namespace", "default"}, {"labels", labels}}},
		{"spec", spec},
		{"status", object{{"phase", "Pending"}}},
	}
}

func spread(topologyKey string, labels object) object {
	return object{
		{"maxSkew", 1},
		{"topologyKey", topologyKey},
		{"whenUnsatisfiable", "DoNotSchedule"},
		{"labelSelector", selector(labels)},
	}
}

func requiredTerm(topologyKey string, labels object) object {
	term := object{{"topologyKey", topologyKey}, {"labelSelector", selector(labels)}}
	return object{{"requiredDuringSchedulingIgnoredDuringExecution", []object{term}}}
}

func selector(labels object) object {
	return object{{"matchLabels", labels}}
}

// object is a JSON object whose members keep the order they were added in, as the keys of
// the Python generator's dicts did; the bytes depend on it.
type object []member

type member struct {
	key   string
	value any
}

// update sets each of extra's members as a Python dict's update does: a key already there
// keeps its place, a new one goes last.
func (o *object) update(extra object) {
	for _, m := range extra {
		i := 0
		for i < len(*o) && (*o)[i].key != m.key {
			i++
		}
		if i == len(*o) {
			*o = append(*o, m)
		} else {
			(*o)[i].value = m.value
		}
	}
}

// writeValue writes v as Python's json.dump with separators (",", ":") does.
func writeValue(w *bufio.Writer, v any) error {
	switch v := v.(type) {
	case object:
		w.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			writeString(w, m.key)
			w.WriteByte(':')
			if err := writeValue(w, m.value); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case []object:
		w.WriteByte('[')
		for i, o := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeValue(w, o); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	case []string:
		w.WriteByte('[')
		for i, s := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			writeString(w, s)
		}
		w.WriteByte(']')
	case string:
		writeString(w, v)
	case int:
		w.WriteString(strconv.Itoa(v))
	default:
		return fmt.Errorf("writing JSON: unsupported type %T", v)
	}
	// A bufio.Writer keeps its first error; Write returns it from Flush.
	return nil
}

// writeString writes s as Python's json module does by default (ensure_ascii): printable
// ASCII as it is, everything else escaped.
func writeString(w *bufio.Writer, s string) {
	w.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			w.WriteByte('\\')
			w.WriteRune(c)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '\r':
			w.WriteString(`\r`)
		case c == '\t':
			w.WriteString(`\t`)
		case c == '\b':
			w.WriteString(`\b`)
		case c == '\f':
			w.WriteString(`\f`)
		case c >= ' ' && c <= '~':
			w.WriteRune(c)
		case c > 0xffff:
			hi, lo := utf16.EncodeRune(c)
			fmt.Fprintf(w, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(w, `\u%04x`, c)
		}
	}
	w.WriteByte('"')
}
