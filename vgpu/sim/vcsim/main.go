// Command vcsim runs govmomi's vSphere API simulator (VPX model) shaped like the GPU lab
// the vgpu studies used: a cluster of ESXi 8.0 hosts, each with NVIDIA A100 80GB PCIe
// devices, the NVIDIA AI Enterprise host driver VIB (read through HostImageConfigManager),
// MIG-backed and time-sliced vGPU types, Shared Direct graphics, a VM template, a datastore
// and a network. Flags shape an "upgraded" lab (other build, other VIB, vGPU types removed,
// hosts in maintenance). It prints its URL on stdout when ready and stops on SIGTERM.
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
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	nvidiaVendorID   = 0x10de
	a100PCIe80GBID   = 0x20b5
	displayClassID   = 0x0302 // 3D controller
	a100MemoryInKB   = 80 * 1024 * 1024
	modelTemplateVM  = "DC0_C0_RP0_VM0"
	mellanoxVendorID = 0x15b3
	connectX6ID      = 0x101b
	ethernetClassID  = 0x0200
	nicVirtualFuncs  = 8
)

// The RDMA NICs of every host: a ConnectX-6 with two ports, port 0 in passthrough (active),
// port 1 with SR-IOV on (as vgpu/sim/lab.py RDMA_NICS lists them).
var rdmaNicPorts = []struct {
	id    string
	sriov bool
}{{"0000:3b:00.0", false}, {"0000:3b:00.1", true}}

// The MIG-backed types of an A100 PCIe 80GB (board code A100D), largest first, then the
// time-sliced ones, as ESXi with the NVIDIA AI Enterprise host driver lists them.
var a100dVgpuTypes = []string{
	"grid_a100d-7-80c", "grid_a100d-4-40c", "grid_a100d-3-40c", "grid_a100d-2-20c",
	"grid_a100d-1-20c", "grid_a100d-1-10c", "grid_a100d-1-10cme",
	"grid_a100d-4c", "grid_a100d-5c", "grid_a100d-8c", "grid_a100d-10c", "grid_a100d-16c",
	"grid_a100d-20c", "grid_a100d-40c", "grid_a100d-80c",
}

const (
	nvidiaVibName     = "NVD-AIE_ESXi_8.0.0_Driver"
	defaultVibVersion = "535.161.05-1OEM.800.1.0.20613240"
)

// imageConfigManager answers the host's HostImageConfigManager calls (the simulator
// registers the reference but has no object behind it): the installed VIBs, the
// NVIDIA AI Enterprise host driver among them, and the host's acceptance level.
type imageConfigManager struct {
	mo.HostImageConfigManager
	packages []types.SoftwarePackage
}

func (m *imageConfigManager) FetchSoftwarePackages(ctx *simulator.Context, req *types.FetchSoftwarePackages) soap.HasFault {
	return &methods.FetchSoftwarePackagesBody{
		Res: &types.FetchSoftwarePackagesResponse{Returnval: m.packages},
	}
}

func (m *imageConfigManager) HostImageConfigGetAcceptance(ctx *simulator.Context, req *types.HostImageConfigGetAcceptance) soap.HasFault {
	return &methods.HostImageConfigGetAcceptanceBody{
		Res: &types.HostImageConfigGetAcceptanceResponse{Returnval: "partner"},
	}
}

func softwarePackages(c labConfig) []types.SoftwarePackage {
	created := time.Date(2024, 2, 22, 0, 0, 0, 0, time.UTC)
	esxiVersion := fmt.Sprintf("%s-0.0.%s", c.version, c.build)
	return []types.SoftwarePackage{
		{Name: "esx-base", Version: esxiVersion, Type: "bootbank", Vendor: "VMware",
			AcceptanceLevel: "vmware_certified", Summary: "ESXi base system",
			Description: "ESXi base system", CreationDate: &created},
		{Name: nvidiaVibName, Version: c.vibVersion, Type: "bootbank", Vendor: "NVD",
			AcceptanceLevel: "partner",
			Summary:         "NVIDIA AI Enterprise vGPU host driver for ESXi 8.0",
			Description:     "NVIDIA AI Enterprise vGPU host driver (vGPU manager)",
			CreationDate:    &created},
	}
}

// addImageConfigManager gives the host its own HostImageConfigManager object; withDriver
// false leaves the NVIDIA VIB out.
func addImageConfigManager(h *simulator.HostSystem, c labConfig, withDriver bool) {
	packages := softwarePackages(c)
	if !withDriver {
		packages = packages[:1]
	}
	manager := &imageConfigManager{packages: packages}
	manager.Self = types.ManagedObjectReference{
		Type: "HostImageConfigManager", Value: "imageconfigmanager-" + h.Self.Value}
	ref := simulator.Map.Put(manager).Reference()
	h.ConfigManager.ImageConfigManager = &ref
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
	vibVersion   string
	removedTypes map[string]bool
	disconnected map[int]bool
	maintenance  map[int]bool
	sriovOff     map[int]bool
	hostOptions  []types.BaseOptionValue
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
	flag.StringVar(&c.vibVersion, "vib-version", defaultVibVersion, "version of the NVIDIA host driver VIB every host reports")
	removed := flag.String("remove-vgpu-types", "", "vGPU types no host offers, e.g. grid_a100d-1-10c,grid_a100d-2-20c")
	disconnected := flag.String("disconnected", "", "host indexes reported as disconnected, e.g. 1,2")
	maintenance := flag.String("maintenance", "", "host indexes in maintenance mode, e.g. 0")
	sriovOff := flag.String("sriov-off", "", "host indexes whose NIC has SR-IOV turned off, e.g. 1")
	hostOptions := flag.String("host-option", "", "advanced options every host knows, with their start values, e.g. PCI.Foo=0,Net.Bar=x (integers stay integers)")
	flag.Parse()
	c.disconnected = hostIndexes("-disconnected", *disconnected, c.hosts)
	c.maintenance = hostIndexes("-maintenance", *maintenance, c.hosts)
	c.sriovOff = hostIndexes("-sriov-off", *sriovOff, c.hosts)
	c.hostOptions = parseHostOptions(*hostOptions)
	c.removedTypes = map[string]bool{}
	for _, name := range strings.Split(*removed, ",") {
		if name != "" {
			c.removedTypes[strings.TrimSpace(name)] = true
		}
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

// hostIndexes parses a comma list of host indexes for the flag named.
func hostIndexes(flagName, spec string, hosts int) map[int]bool {
	out := map[int]bool{}
	for _, item := range strings.Split(spec, ",") {
		if item == "" {
			continue
		}
		index, err := strconv.Atoi(item)
		if err != nil || index < 0 || index >= hosts {
			log.Fatalf("bad %s entry %q (want host indexes below -hosts)", flagName, item)
		}
		out[index] = true
	}
	return out
}

// parseHostOptions reads Key=Value pairs; a value that is an integer is kept as one (ESXi
// keeps integer options as longs and refuses strings for them).
func parseHostOptions(spec string) []types.BaseOptionValue {
	var out []types.BaseOptionValue
	for _, item := range strings.Split(spec, ",") {
		if item == "" {
			continue
		}
		parts := strings.SplitN(item, "=", 2)
		if len(parts) != 2 || parts[0] == "" {
			log.Fatalf("bad -host-option entry %q (want Key=Value)", item)
		}
		var value interface{} = parts[1]
		if number, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
			value = number
		}
		out = append(out, &types.OptionValue{Key: parts[0], Value: value})
	}
	return out
}

// addOptionManager gives the host an advanced-option manager of its own (the simulator's
// hosts share one list, so a change on one host would show on all).
func addOptionManager(h *simulator.HostSystem, c labConfig) {
	settings := []types.BaseOptionValue{&types.OptionValue{Key: "Config.HostAgent.log.level", Value: "info"}}
	for _, option := range c.hostOptions {
		value := *option.GetOptionValue()
		settings = append(settings, &value)
	}
	ref := types.ManagedObjectReference{Type: "OptionManager", Value: "advoptions-" + h.Self.Value}
	manager := simulator.NewOptionManager(&ref, settings)
	simulator.Map.Put(manager)
	h.ConfigManager.AdvancedOption = &ref
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
			DeviceId:     labGpu().deviceID,
			SubVendorId:  nvidiaVendorID,
			SubDeviceId:  labGpu().subDeviceID,
			VendorName:   "NVIDIA Corporation",
			DeviceName:   labGpu().deviceName,
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
	h.Runtime.InMaintenanceMode = c.maintenance[index]
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
	offersVgpu := index < noVgpuFrom
	// Hosts without vGPU types are hosts without the NVIDIA host driver.
	addImageConfigManager(h, c, offersVgpu)
	addOptionManager(h, c)
	shapeGpus(h, gpus)
	addRdmaNics(h, !c.sriovOff[index])
	h.Config.SharedPassthruGpuTypes = nil
	if offersVgpu {
		for _, name := range labGpu().vgpuTypes {
			if !c.removedTypes[name] {
				h.Config.SharedPassthruGpuTypes = append(h.Config.SharedPassthruGpuTypes, name)
			}
		}
	}
}

// shapeGpus adds the GPUs to the host's PCI devices, in Shared Direct (vGPU) mode: each
// one configured and active as sharedDirect, passthrough capable but not enabled.
func shapeGpus(h *simulator.HostSystem, gpus int) {
	// A fresh slice: hosts share the simulator's default hardware description.
	pci := append([]types.HostPciDevice{}, h.Hardware.PciDevice...)
	pci = append(pci, a100Devices(gpus)...)
	h.Hardware.PciDevice = pci

	graphics := []types.HostGraphicsInfo{}
	deviceTypes := []types.HostGraphicsConfigDeviceType{}
	passthru := []types.BaseHostPciPassthruInfo{}
	for _, d := range a100Devices(gpus) {
		graphics = append(graphics, types.HostGraphicsInfo{
			DeviceName:     d.DeviceName,
			VendorName:     d.VendorName,
			PciId:          d.Id,
			GraphicsType:   "sharedDirect",
			MemorySizeInKB: a100MemoryInKB,
		})
		deviceTypes = append(deviceTypes, types.HostGraphicsConfigDeviceType{
			DeviceId: d.Id, GraphicsType: "sharedDirect"})
		passthru = append(passthru, &types.HostPciPassthruInfo{
			Id: d.Id, DependentDevice: d.Id, PassthruCapable: true})
	}
	h.Config.GraphicsInfo = graphics
	h.Config.GraphicsConfig = &types.HostGraphicsConfig{
		HostDefaultGraphicsType:        "sharedDirect",
		SharedPassthruAssignmentPolicy: "performance",
		DeviceType:                     deviceTypes,
	}
	h.Config.PciPassthruInfo = passthru
}

// addRdmaNics adds the ConnectX-6 ports to the host's PCI devices and passthrough info:
// port 0 passthrough-active, port 1 an SR-IOV physical function (VFs on unless sriovOn is
// false).
func addRdmaNics(h *simulator.HostSystem, sriovOn bool) {
	for i, port := range rdmaNicPorts {
		h.Hardware.PciDevice = append(h.Hardware.PciDevice, types.HostPciDevice{
			Id: port.id, ClassId: ethernetClassID, Bus: 0x3b, Function: byte(i),
			VendorId: mellanoxVendorID, DeviceId: connectX6ID, SubVendorId: mellanoxVendorID,
			SubDeviceId: 0x0007, VendorName: "Mellanox Technologies",
			DeviceName: "MT28908 Family [ConnectX-6]", ParentBridge: "0000:3a:00.0",
		})
		info := types.HostPciPassthruInfo{Id: port.id, DependentDevice: port.id,
			PassthruCapable: true, PassthruEnabled: !port.sriov, PassthruActive: !port.sriov}
		if !port.sriov {
			h.Config.PciPassthruInfo = append(h.Config.PciPassthruInfo, &info)
			continue
		}
		vfs := int32(0)
		if sriovOn {
			vfs = nicVirtualFuncs
		}
		h.Config.PciPassthruInfo = append(h.Config.PciPassthruInfo, &types.HostSriovInfo{
			HostPciPassthruInfo: info, SriovEnabled: sriovOn, SriovCapable: true,
			SriovActive: sriovOn, NumVirtualFunctionRequested: vfs, NumVirtualFunction: vfs,
			MaxVirtualFunctionSupported: 127})
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
	if err := setFirmware(ctx, vm, *templateFirmware); err != nil {
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
	if err := addLabNetworks(context.Background(), &login); err != nil {
		log.Fatalf("adding the lab networks: %v", err)
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

// --- GPU form factor: a PCIe card or an HGX board's SXM module -------------------------

var gpuForm = flag.String("gpu-form", "pcie", "the hosts' A100 80GB GPUs: pcie (device 0x20b5, board A100D) or sxm (HGX A100 80GB: device 0x20b2, board A100DX)")

// gpuKind is what the hosts' GPUs show: PCI ids, name, and the vGPU types the host driver
// lists for their board (the board code follows the PCI device id).
type gpuKind struct {
	deviceID    int16
	subDeviceID int16
	deviceName  string
	vgpuTypes   []string
}

func labGpu() gpuKind {
	switch *gpuForm {
	case "pcie":
		return gpuKind{a100PCIe80GBID, 0x1533, "GA100 [A100 PCIe 80GB]", a100dVgpuTypes}
	case "sxm":
		return gpuKind{a100SXM80GBID, 0x1463, "GA100 [A100 SXM4 80GB]", onBoard(a100dVgpuTypes, "a100d", "a100dx")}
	}
	log.Fatalf("bad -gpu-form %q (want pcie or sxm)", *gpuForm)
	return gpuKind{}
}

const a100SXM80GBID = 0x20b2

// onBoard renames vGPU types from one board code to another (grid_a100d-1-10c ->
// grid_a100dx-1-10c).
func onBoard(names []string, from, to string) []string {
	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, strings.Replace(name, "_"+from+"-", "_"+to+"-", 1))
	}
	return out
}

// --- the template's firmware -------------------------------------------------------------

var templateFirmware = flag.String("template-firmware", "efi", "firmware of the VM template: efi (what vGPU VMs need) or bios")

// setFirmware sets a VM's firmware through the API, as building the template in the
// vSphere Client would.
func setFirmware(ctx context.Context, vm *object.VirtualMachine, firmware string) error {
	if firmware != "efi" && firmware != "bios" {
		return fmt.Errorf("bad -template-firmware %q (want efi or bios)", firmware)
	}
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{Firmware: firmware})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// --- networks beside "VM Network" ----------------------------------------------------------

// A second standard port group (on vSwitch0) and a distributed port group on a DVS that
// every host is a member of: a placement may name either.
const (
	labPortGroup   = "vgpu-lab"
	labDvs         = "vgpu-dvs"
	labDvPortGroup = "vgpu-dvpg"
)

func addLabNetworks(ctx context.Context, u *url.URL) error {
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
	hosts, err := finder.HostSystemList(ctx, "*")
	if err != nil {
		return err
	}
	if err := addStandardPortGroup(ctx, hosts); err != nil {
		return err
	}
	return addDistributedPortGroup(ctx, client, dc, hosts)
}

// addStandardPortGroup adds the port group on the first host: the simulator keeps one
// network object per name for the whole datacenter, so the other hosts see it too.
func addStandardPortGroup(ctx context.Context, hosts []*object.HostSystem) error {
	if len(hosts) == 0 {
		return nil
	}
	network, err := hosts[0].ConfigManager().NetworkSystem(ctx)
	if err != nil {
		return err
	}
	return network.AddPortGroup(ctx, types.HostPortGroupSpec{
		Name: labPortGroup, VswitchName: "vSwitch0", Policy: types.HostNetworkPolicy{}})
}

func addDistributedPortGroup(ctx context.Context, client *govmomi.Client, dc *object.Datacenter, hosts []*object.HostSystem) error {
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	members := []types.DistributedVirtualSwitchHostMemberConfigSpec{}
	for _, host := range hosts {
		members = append(members, types.DistributedVirtualSwitchHostMemberConfigSpec{
			Operation: string(types.ConfigSpecOperationAdd), Host: host.Reference()})
	}
	spec := types.DVSCreateSpec{ConfigSpec: &types.VMwareDVSConfigSpec{
		DVSConfigSpec: types.DVSConfigSpec{Name: labDvs}}}
	task, err := folders.NetworkFolder.CreateDVS(ctx, spec)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	dvs := object.NewDistributedVirtualSwitch(client.Client, info.Result.(types.ManagedObjectReference))
	// The simulator's CreateDVS ignores the spec's hosts: they join by a reconfigure.
	task, err = dvs.Reconfigure(ctx, &types.DVSConfigSpec{Host: members})
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil {
		return err
	}
	task, err = dvs.AddPortgroup(ctx, []types.DVPortgroupConfigSpec{{
		Name: labDvPortGroup, Type: string(types.DistributedVirtualPortgroupPortgroupTypeEarlyBinding), NumPorts: 128}})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}
