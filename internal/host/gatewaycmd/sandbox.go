package gatewaycmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/daemon"
	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
)

func newSandboxCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Manage sandboxes and their images: ls, stop, rm, prune, image"}
	var (
		force   bool
		profile string
		list    bool
		oci     string
		gw      bool
	)
	image := &cobra.Command{
		Use:   "image [TAG]",
		Short: "Build a sandbox image from a profile, without a registry (default: busybox)",
		Long: `Builds a sandbox image without a container registry: the root filesystem is
made on this host and imported into Docker. The default profile compiles
busybox from Debian's source package (pinned and checked by SHA-256, with
Debian's patches and configuration) against musl, once, ~30 s: a glibc
program's start costs ~0.7 ms of CPU on a virtual machine, musl's 0.05,
and an agent starts many. busybox-host takes the host's busybox-static
instead, with nothing to download or build; claude-code is a Debian base
made by mmdebstrap from the Debian archive plus the CLI from npm.
Downloads and builds are cached under $TOOLGATE_IMAGE_CACHE (default
$TMPDIR/toolgate-image-cache); an image whose profile version is current
is not rebuilt. Set the printed tag as an agent's image in config.yaml.

Any image of your own works too: toolgate mounts everything it needs.

For Kubernetes (docs/kubernetes.md), --oci writes the image as an OCI
archive instead, with toolgate-client and toolgate-launch (found beside this
program) inside: a pod cannot mount them from the host. Import it into a
node's containerd (ctr -n k8s.io images import FILE) or push it to a
registry. With --gateway the archive is the gateway's own image
(deploy/kubernetes/gateway.yaml): this program, which must be statically
linked (CGO_ENABLED=0), running toolgate-gateway serve.`,
		Example: `  toolgate sandbox image --profile claude-code
  toolgate sandbox image --list
  toolgate sandbox image --oci sandbox.tar registry.example/toolgate/sandbox:1
  toolgate sandbox image --oci gateway.tar --gateway registry.example/toolgate/gateway:1`,
		Args: cli.Words(0, 1, "[TAG]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				for _, p := range rootfs.Profiles() {
					fmt.Printf("%-12s %-28s %s\n", p.Name(), p.Tag(), p.Summary())
				}
				return nil
			}
			p, err := rootfs.Lookup(profile)
			if err != nil {
				return cli.UsageErr(cmd, err.Error())
			}
			tag := p.Tag()
			if len(args) == 1 {
				tag = args[0]
			}
			if gw && oci == "" {
				return cli.UsageErr(cmd, "--gateway writes an OCI archive: give --oci FILE")
			}
			if oci != "" {
				if err := daemon.WriteOCI(cmd.Context(), oci, tag, p, rootfs.Env{Log: os.Stderr}, gw); err != nil {
					return err
				}
				fmt.Println("wrote", tag, "to", oci)
				return nil
			}
			built, err := daemon.BuildImage(cmd.Context(), tag, p, rootfs.Env{Log: os.Stderr}, force)
			if err != nil {
				return err
			}
			if built {
				fmt.Println("built", tag)
			} else {
				fmt.Println(tag, "is current (use --force to rebuild)")
			}
			return nil
		},
	}
	image.Flags().BoolVar(&force, "force", false, "rebuild even when the image is current")
	image.Flags().StringVar(&profile, "profile", "default", "what the image holds (see --list)")
	image.Flags().BoolVar(&list, "list", false, "list the profiles")
	image.Flags().StringVar(&oci, "oci", "", "write the image to `FILE` as an OCI archive (Kubernetes), not into Docker")
	image.Flags().BoolVar(&gw, "gateway", false, "with --oci: the gateway's image (toolgate-gateway serve)")
	cmd.AddCommand(image)
	cmd.AddCommand(lifecycleCmds(g)...)
	return cmd
}
