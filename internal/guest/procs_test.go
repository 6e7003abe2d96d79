package guest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupCPULimit(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		cpus  float64
		ok    bool
	}{
		{"v2 one CPU over 10 ms", map[string]string{"cpu.max": "10000 10000\n"}, 1, true},
		{"v2 1.5 CPUs", map[string]string{"cpu.max": "150000 100000\n"}, 1.5, true},
		{"v2 none", map[string]string{"cpu.max": "max 100000\n"}, 0, false},
		{"v2 garbled", map[string]string{"cpu.max": "10000\n"}, 0, false},
		{"v2 zero period", map[string]string{"cpu.max": "10000 0\n"}, 0, false},
		{"v2 first though v1 is there", map[string]string{"cpu.max": "max 100000\n",
			"cpu/cpu.cfs_quota_us": "10000\n", "cpu/cpu.cfs_period_us": "10000\n"}, 0, false},
		{"v1 one CPU", map[string]string{"cpu/cpu.cfs_quota_us": "10000\n", "cpu/cpu.cfs_period_us": "10000\n"}, 1, true},
		{"v1 a fifth", map[string]string{"cpu/cpu.cfs_quota_us": "20000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.2, true},
		{"v1 none", map[string]string{"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0, false},
		{"v1 no period", map[string]string{"cpu/cpu.cfs_quota_us": "10000\n"}, 0, false},
		{"no cgroup files", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cpus, ok := cgroupCPULimit(root)
			if cpus != tt.cpus || ok != tt.ok {
				t.Errorf("cgroupCPULimit = %v, %v; want %v, %v", cpus, ok, tt.cpus, tt.ok)
			}
		})
	}
}

func TestProcsFor(t *testing.T) {
	tests := []struct {
		limit float64
		ncpu  int
		want  int
	}{
		{1, 2, 1}, {0.2, 2, 1}, {1.5, 4, 1}, {2, 4, 2}, {3.9, 8, 3},
		{2, 2, 0}, {4, 2, 0}, {0, 2, 0}, {-1, 2, 0},
	}
	for _, tt := range tests {
		if got := procsFor(tt.limit, tt.ncpu); got != tt.want {
			t.Errorf("procsFor(%v, %d) = %d, want %d", tt.limit, tt.ncpu, got, tt.want)
		}
	}
}
