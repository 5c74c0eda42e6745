package userdata

import (
	"encoding/base64"
	"mime"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// FuzzUserData merges a node class's own user data (any text) into each AMI family's
// bootstrap: either an error that names userData, or base64 user data the node reads back:
// for AL2023 and AL2 a MIME document whose parts are the node class's parts followed by
// Tailor's, for Bottlerocket TOML that carries the cluster, for Custom the user data as is.
// The merge adds at most the bootstrap to what it was given.
func FuzzUserData(f *testing.F) {
	for _, custom := range []string{
		"",
		"#!/bin/bash\necho hello\n",
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho one\n--BOUNDARY--\n",
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n--//\r\nContent-Type: text/x-shellscript\r\n\r\necho --//\r\n--//--\r\n",
		"MIME-Version: 1.0\nContent-Type: text/plain\n\nnot multipart\n",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n",
		"#!/bin/bash\ncat <<EOF\n--//\nContent-Type: text/plain\n\nEOF\n",
		"[settings.kubernetes]\nmax-pods = 10\n[settings.kubernetes.node-labels]\nteam = \"a\"\n",
		"[settings]\nkubernetes = 1\n",
		"settings = \"x\"\n",
		"[settings.kubernetes]\nnode-taints = [1, 2]\n",
		"[[settings]]\n",
		"\x00\xff",
	} {
		for family := range byte(4) {
			f.Add(family, custom)
		}
	}
	families := []string{awsv1.AMIFamilyAL2023, awsv1.AMIFamilyAL2, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyCustom}
	f.Fuzz(func(t *testing.T, which byte, custom string) {
		family := families[int(which)%len(families)]
		b := claimBootstrap()
		b.Custom = custom
		encoded, err := Render(family, b)
		if err != nil {
			require.Contains(t, err.Error(), "userData", "error %q names no field", err)
			return
		}
		decoded, err := base64.StdEncoding.DecodeString(encoded)
		require.NoError(t, err)
		const bootstrapSize = 4096
		require.LessOrEqual(t, len(decoded), 2*len(custom)+bootstrapSize, "user data grew beyond its input and the bootstrap")
		switch family {
		case awsv1.AMIFamilyCustom:
			require.Equal(t, custom, string(decoded))
		case awsv1.AMIFamilyBottlerocket:
			var doc struct {
				Settings struct {
					Kubernetes struct {
						ClusterName string `toml:"cluster-name"`
						APIServer   string `toml:"api-server"`
					} `toml:"kubernetes"`
				} `toml:"settings"`
			}
			_, err := toml.Decode(string(decoded), &doc)
			require.NoError(t, err, "user data:\n%s", decoded)
			require.Equal(t, b.Cluster.Name, doc.Settings.Kubernetes.ClusterName)
			require.Equal(t, b.Cluster.Endpoint, doc.Settings.Kubernetes.APIServer)
		default:
			got, err := customParts(string(decoded), "")
			require.NoError(t, err, "user data:\n%s", decoded)
			var want []mimePart
			if custom != "" {
				want, err = customParts(custom, "")
				require.NoError(t, err)
			}
			require.Len(t, got, len(want)+1, "user data:\n%s", decoded)
			for i, p := range want {
				require.Equal(t, p.body, got[i].body, "part %d", i)
			}
			_, params, err := mime.ParseMediaType(strings.SplitN(strings.SplitN(string(decoded), "\r\n", 3)[1], ": ", 2)[1])
			require.NoError(t, err)
			for i, p := range got {
				for _, line := range strings.Split(p.body, "\n") {
					line = strings.TrimSuffix(strings.TrimRight(strings.TrimSuffix(line, "\r"), " \t"), "--")
					require.NotEqual(t, "--"+params["boundary"], line, "part %d holds a line cloud-init reads as a boundary", i)
				}
			}
			last := got[len(got)-1]
			require.True(t, strings.Contains(last.body, b.Cluster.Endpoint), "Tailor's part lost the cluster: %q", last.body)
		}
	})
}
