// Command vcsim runs govmomi's vSphere API simulator (VPX model) shaped like the GPU lab
// the vgpu studies used: a cluster of ESXi 8.0 hosts, each with NVIDIA A100 80GB PCIe
// devices, MIG-backed and time-sliced vGPU types, Shared Direct graphics, a VM template,
// a datastore and a network. It prints its URL on stdout when ready and stops on SIGTERM.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	nvidiaVendorID  = 0x10de
	a100PCIe80GBID  = 0x20b5
	displayClassID  = 0x0302 // 3D controller
	a100MemoryInKB  = 80 * 1024 * 1024
	modelTemplateVM = "DC0_C0_RP0_VM0"
)

// The MIG-backed types of an A100 PCIe 80GB (board code A100D), largest first, then the
// time-sliced ones, as ESXi with the NVIDIA AI Enterprise host driver lists them.
var a100dVgpuTypes = []string{
	"grid_a100d-7-80c", "grid_a100d-4-40c", "grid_a100d-3-40c", "grid_a100d-2-20c",
	"grid_a100d-1-20c", "grid_a100d-1-10c", "grid_a100d-1-10cme",
	"grid_a100d-4c", "grid_a100d-5c", "grid_a100d-8c", "grid_a100d-10c", "grid_a100d-16c",
	"grid_a100d-20c", "grid_a100d-40c", "grid_a100d-80c",
}

type labConfig struct {
	listen       string
	hosts        int
	gpusPerHost  int
	noVgpuHosts  int
	noGpuHosts   int
	tlsOn        bool
	caOut        string
	username     string
	password     string
	version      string
	build        string
	template     string
	methodDelays string
	disconnected map[int]bool
}

func parseFlags() labConfig {
	var c labConfig
	flag.StringVar(&c.listen, "listen", "127.0.0.1:0", "address:port to listen on (port 0 picks a free one)")
	flag.IntVar(&c.hosts, "hosts", 2, "ESXi hosts in the cluster (all kinds together)")
	flag.IntVar(&c.gpusPerHost, "gpus", 4, "A100 80GB devices per GPU host")
	flag.IntVar(&c.noVgpuHosts, "no-vgpu-hosts", 0, "hosts (taken from the end) with GPUs but no vGPU types")
	flag.IntVar(&c.noGpuHosts, "no-gpu-hosts", 0, "hosts (taken from the end) with no GPU at all")
	flag.BoolVar(&c.tlsOn, "tls", true, "serve https (false: plain http)")
	flag.StringVar(&c.caOut, "ca-out", "", "write the server certificate (PEM) here, usable as a CA bundle")
	flag.StringVar(&c.username, "username", "user", "login user name")
	flag.StringVar(&c.password, "password", "", "login password (default: $VGPU_SIM_PASSWORD)")
	flag.StringVar(&c.version, "esxi-version", "8.0.2", "ESXi product version reported by every host")
	flag.StringVar(&c.build, "esxi-build", "22380479", "ESXi build number reported by every host")
	flag.StringVar(&c.template, "template", "vgpu-template", "name of the VM template")
	flag.StringVar(&c.methodDelays, "method-delay", "", "per-method latency, e.g. CloneVM_Task=300,ReconfigVM_Task=100 (ms)")
	disconnected := flag.String("disconnected", "", "host indexes reported as disconnected, e.g. 1,2")
	flag.Parse()
	c.disconnected = map[int]bool{}
	for _, item := range strings.Split(*disconnected, ",") {
		if item == "" {
			continue
		}
		index, err := strconv.Atoi(item)
		if err != nil || index < 0 || index >= c.hosts {
			log.Fatalf("bad -disconnected entry %q (want host indexes below -hosts)", item)
		}
		c.disconnected[index] = true
	}
	if c.password == "" {
		c.password = os.Getenv("VGPU_SIM_PASSWORD")
	}
	if c.password == "" {
		log.Fatal("no password: pass -password or set VGPU_SIM_PASSWORD")
	}
	if c.noGpuHosts+c.noVgpuHosts > c.hosts {
		log.Fatal("-no-gpu-hosts plus -no-vgpu-hosts exceeds -hosts")
	}
	return c
}

func parseDelays(spec string) (map[string]int, error) {
	delays := map[string]int{}
	if spec == "" {
		return delays, nil
	}
	for _, item := range strings.Split(spec, ",") {
		parts := strings.SplitN(item, "=", 2)
		if len(parts) != 2 {
			return nil, fmt.Errorf("bad -method-delay entry %q (want Method=ms)", item)
		}
		ms, err := strconv.Atoi(parts[1])
		if err != nil {
			return nil, fmt.Errorf("bad -method-delay value %q: %v", item, err)
		}
		delays[parts[0]] = ms
	}
	return delays, nil
}

func a100Devices(count int) []types.HostPciDevice {
	devices := make([]types.HostPciDevice, 0, count)
	for i := 0; i < count; i++ {
		devices = append(devices, types.HostPciDevice{
			Id:           fmt.Sprintf("0000:%02x:00.0", 0x17+0x20*i), // as vgpu/sim/lab.py gpu_pci_ids
			ClassId:      displayClassID,
			Bus:          byte(0x17 + 0x20*i),
			VendorId:     nvidiaVendorID,
			DeviceId:     a100PCIe80GBID,
			SubVendorId:  nvidiaVendorID,
			SubDeviceId:  0x1533,
			VendorName:   "NVIDIA Corporation",
			DeviceName:   "GA100 [A100 PCIe 80GB]",
			ParentBridge: fmt.Sprintf("0000:%02x:00.0", 0x16+0x20*i),
		})
	}
	return devices
}

// shapeHost turns a default simulator host into one of the lab's ESXi 8 GPU hosts.
func shapeHost(h *simulator.HostSystem, index int, c labConfig) {
	product := h.Config.Product
	product.Name = "VMware ESXi"
	product.Version = c.version
	product.Build = c.build
	product.FullName = fmt.Sprintf("VMware ESXi %s build-%s", c.version, c.build)
	// ESXi reports its API version as the product version plus ".0" (8.0.2 -> 8.0.2.0).
	parts := strings.SplitN(c.version, ".", 3)
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	product.ApiVersion = strings.Join(append(parts, "0"), ".")
	h.Config.Product = product
	h.Summary.Config.Product = &h.Config.Product
	if c.disconnected[index] {
		h.Runtime.ConnectionState = types.HostSystemConnectionStateDisconnected
	}
	h.Hardware.SystemInfo.Vendor = "Dell Inc."
	h.Hardware.SystemInfo.Model = "PowerEdge R750xa"
	h.Summary.Hardware.Vendor = "Dell Inc."
	h.Summary.Hardware.Model = "PowerEdge R750xa"

	noGpuFrom := c.hosts - c.noGpuHosts
	noVgpuFrom := noGpuFrom - c.noVgpuHosts
	gpus := c.gpusPerHost
	if index >= noGpuFrom {
		gpus = 0
	}
	// A fresh slice: hosts share the simulator's default hardware description.
	pci := append([]types.HostPciDevice{}, h.Hardware.PciDevice...)
	pci = append(pci, a100Devices(gpus)...)
	h.Hardware.PciDevice = pci

	graphics := []types.HostGraphicsInfo{}
	for _, d := range a100Devices(gpus) {
		graphics = append(graphics, types.HostGraphicsInfo{
			DeviceName:     d.DeviceName,
			VendorName:     d.VendorName,
			PciId:          d.Id,
			GraphicsType:   "sharedDirect",
			MemorySizeInKB: a100MemoryInKB,
		})
	}
	h.Config.GraphicsInfo = graphics
	h.Config.GraphicsConfig = &types.HostGraphicsConfig{
		HostDefaultGraphicsType:        "sharedDirect",
		SharedPassthruAssignmentPolicy: "performance",
	}
	if index < noVgpuFrom {
		h.Config.SharedPassthruGpuTypes = append([]string{}, a100dVgpuTypes...)
	} else {
		h.Config.SharedPassthruGpuTypes = nil
	}
}

// selfSignedCert makes a P-256 certificate for the listen host, localhost and 127.0.0.1
// (the simulator's built-in one has a key that OpenSSL's default security level rejects).
func selfSignedCert(listenHost string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	template := x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "vgpu vcsim lab", Organization: []string{"vgpu"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	if ip := net.ParseIP(listenHost); ip != nil && !ip.Equal(net.ParseIP("127.0.0.1")) {
		template.IPAddresses = append(template.IPAddresses, ip)
	} else if ip == nil && listenHost != "" && listenHost != "localhost" {
		template.DNSNames = append(template.DNSNames, listenHost)
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDer, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDer})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// makeTemplate renames the model's VM and marks it as a template, through the API.
func makeTemplate(ctx context.Context, u *url.URL, name string) error {
	client, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return err
	}
	defer func() { _ = client.Logout(ctx) }()
	finder := find.NewFinder(client.Client, true)
	dc, err := finder.DefaultDatacenter(ctx)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	vm, err := finder.VirtualMachine(ctx, modelTemplateVM)
	if err != nil {
		return err
	}
	task, err := vm.Rename(ctx, name)
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil {
		return err
	}
	return vm.MarkAsTemplate(ctx)
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("vcsim: ")
	c := parseFlags()
	delays, err := parseDelays(c.methodDelays)
	if err != nil {
		log.Fatal(err)
	}

	model := simulator.VPX()
	model.Host = 0 // no standalone hosts: only the GPU cluster
	model.Cluster = 1
	model.ClusterHost = c.hosts
	model.Portgroup = 0 // VMs use the standard "VM Network"
	model.Machine = 1   // the one VM becomes the template
	model.Autostart = false
	if err := model.Create(); err != nil {
		log.Fatal(err)
	}
	defer model.Remove()

	// The registry lists hosts in no fixed order; the index in the name (DC0_C0_H<i>) decides
	// which hosts are the special ones, so a lab is the same on every start.
	for _, obj := range simulator.Map.All("HostSystem") {
		host := obj.(*simulator.HostSystem)
		index, err := strconv.Atoi(host.Name[strings.LastIndex(host.Name, "_H")+2:])
		if err != nil {
			log.Fatalf("unexpected host name %q", host.Name)
		}
		shapeHost(host, index, c)
	}

	model.Service.Listen = &url.URL{Host: c.listen, User: url.UserPassword(c.username, c.password)}
	var certPEM []byte
	if c.tlsOn {
		host, _, err := net.SplitHostPort(c.listen)
		if err != nil {
			log.Fatalf("bad -listen %q: %v", c.listen, err)
		}
		cert, pemBytes, err := selfSignedCert(host)
		if err != nil {
			log.Fatal(err)
		}
		certPEM = pemBytes
		model.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	server := model.Service.NewServer()
	defer server.Close()

	login := *server.URL
	login.User = url.UserPassword(c.username, c.password)
	if err := makeTemplate(context.Background(), &login, c.template); err != nil {
		log.Fatalf("creating the template: %v", err)
	}
	model.DelayConfig.MethodDelay = delays

	if c.tlsOn && c.caOut != "" {
		if err := ioutil.WriteFile(c.caOut, certPEM, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	public := *server.URL
	public.User = nil
	fmt.Println(public.String())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
