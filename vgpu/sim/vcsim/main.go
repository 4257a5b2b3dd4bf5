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
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	return packagesOf(c.version, c.build, c.vibVersion)
}

func packagesOf(version, build, vibVersion string) []types.SoftwarePackage {
	created := time.Date(2024, 2, 22, 0, 0, 0, 0, time.UTC)
	esxiVersion := fmt.Sprintf("%s-0.0.%s", version, build)
	return []types.SoftwarePackage{
		{Name: "esx-base", Version: esxiVersion, Type: "bootbank", Vendor: "VMware",
			AcceptanceLevel: "vmware_certified", Summary: "ESXi base system",
			Description: "ESXi base system", CreationDate: &created},
		{Name: nvidiaVibName, Version: vibVersion, Type: "bootbank", Vendor: "NVD",
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
	imageManagers[h.Self] = manager
}

// imageManagers finds a host's image config manager for the lab's upgrade endpoint.
var imageManagers = map[types.ManagedObjectReference]*imageConfigManager{}

// vgpuTypesOf keeps the vGPU types each host offered at the start: an upgrade whose vGPU
// manager loads offers them again.
var vgpuTypesOf = map[types.ManagedObjectReference][]string{}

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
	passthrough  map[int]bool
	hostOptions  []types.BaseOptionValue
	memoryGB     int64
	cpuCores     int16
	systemVms    bool
	xorgOff      bool
}

// labStateDir is where the simulator leaves what the lab's guests read at run time: the
// host each VM last powered on at (vm-host/<vm>) and the slowdown an upgrade brought to
// a host (host-slowdown/<host>, a share of its guests' work: a SIMULATED regression).
var labStateDir string

// upgradesOf counts each host's upgrades (host-upgrades/<host>: a test's view of how often
// a host was upgraded).
var upgradesOf = map[string]int{}

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
	passthrough := flag.String("passthrough-hosts", "", "host indexes whose GPUs are in passthrough (active), e.g. 1")
	flag.Int64Var(&c.memoryGB, "host-memory-gb", 1024, "memory of every host in GiB (a PowerEdge R750xa as labs have it)")
	cores := flag.Int("host-cpu-cores", 64, "CPU cores of every host (2 sockets, 2 threads per core)")
	hostOptions := flag.String("host-option", "", "advanced options every host knows, with their start values, e.g. PCI.Foo=0,Net.Bar=x (integers stay integers)")
	flag.BoolVar(&drsInitialPlacement, "drs-initial-placement", false, "DRS moves a VM at power-on to the host with the fewest powered-on VMs unless its DRS behaviour is manual")
	flag.StringVar(&labStateDir, "state-dir", "", "where the guests read the host of each VM and each host's simulated slowdown (empty: not written)")
	flag.BoolVar(&c.systemVms, "system-vms", false, "run what a real vSphere 8 cluster runs beside the workloads: vCLS VMs (folder vCLS, managed by the ESX Agent Manager, up to 3) and one agent VM per host; maintenance mode powers them off and exit powers them on again")
	flag.BoolVar(&c.xorgOff, "xorg-off", false, "compute GPUs: Xorg is not running on any host and does not start (vGPU mode needs no Xorg since vSphere 7.0 U1; graphics settings take effect at a boot)")
	flag.DurationVar(&vgpuPowerOnDelay, "vgpu-power-on-delay", 0, "how long a vGPU VM's power-on takes once its GPU is chosen, e.g. 200ms")
	flag.Parse()
	c.disconnected = hostIndexes("-disconnected", *disconnected, c.hosts)
	c.maintenance = hostIndexes("-maintenance", *maintenance, c.hosts)
	c.sriovOff = hostIndexes("-sriov-off", *sriovOff, c.hosts)
	c.passthrough = hostIndexes("-passthrough-hosts", *passthrough, c.hosts)
	c.hostOptions = parseHostOptions(*hostOptions)
	c.cpuCores = int16(*cores)
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

// withOption sets an option in the list: a key there already takes the new value.
func withOption(settings []types.BaseOptionValue, value *types.OptionValue) []types.BaseOptionValue {
	for i, setting := range settings {
		if setting.GetOptionValue().Key == value.Key {
			settings[i] = value
			return settings
		}
	}
	return append(settings, value)
}

// addOptionManager gives the host an advanced-option manager of its own (the simulator's
// hosts share one list, so a change on one host would show on all).
func addOptionManager(h *simulator.HostSystem, c labConfig) {
	// ESXi's defaults of the options vgpu records with a host's facts (GPU_VM_OPTIONS).
	settings := []types.BaseOptionValue{
		&types.OptionValue{Key: "Config.HostAgent.log.level", Value: "info"},
		&types.OptionValue{Key: "Power.CpuPolicy", Value: "Balanced"},
		&types.OptionValue{Key: "VMkernel.Boot.iovDisableIR", Value: false},
		&types.OptionValue{Key: "VMkernel.Boot.disableACSCheck", Value: false},
	}
	for _, option := range c.hostOptions {
		value := *option.GetOptionValue()
		settings = withOption(settings, &value)
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
	// Each host its own machine: the simulator copies one hardware description to all.
	systemInfo := h.Hardware.SystemInfo
	systemInfo.Uuid = fmt.Sprintf("4c4c4544-0056-4710-8047-%012d", index)
	h.Hardware.SystemInfo = systemInfo
	h.Summary.Hardware.Uuid = systemInfo.Uuid
	shapeCompute(h, c)

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
	addGraphicsManager(h)
	addServiceSystem(h, c.xorgOff)
	vgpuTypesOf[h.Self] = h.Config.SharedPassthruGpuTypes
	if c.passthrough[index] {
		passthroughGpus(h)
	}
}

// shapeCompute gives the host the memory and CPUs of a GPU server (the simulator's own
// host has 4 GB and 2 threads), on a copy: the simulator shares one description.
func shapeCompute(h *simulator.HostSystem, c labConfig) {
	hardware := *h.Hardware
	hardware.MemorySize = c.memoryGB << 30
	hardware.CpuInfo.NumCpuPackages = 2
	hardware.CpuInfo.NumCpuCores = c.cpuCores
	hardware.CpuInfo.NumCpuThreads = 2 * c.cpuCores
	h.Hardware = &hardware
	summary := *h.Summary.Hardware
	summary.MemorySize = hardware.MemorySize
	summary.NumCpuPkgs = 2
	summary.NumCpuCores = c.cpuCores
	summary.NumCpuThreads = 2 * c.cpuCores
	h.Summary.Hardware = &summary
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
	simulator.Map.AddHandler(placer)
	defer model.Remove()
	enforcePermissions()

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
	if c.systemVms {
		if err := addSystemVms(context.Background(), &login); err != nil {
			log.Fatalf("adding the cluster's system VMs: %v", err)
		}
	}
	model.DelayConfig.MethodDelay = delays

	if c.tlsOn && c.caOut != "" {
		if err := ioutil.WriteFile(c.caOut, certPEM, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	model.Service.ServeMux.HandleFunc(upgradePath, upgradeHandler(c))
	model.Service.ServeMux.HandleFunc(xorgPath, xorgHandler(c))

	public := *server.URL
	public.User = nil
	fmt.Println(public.String())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

// ---- vGPU placement: the host graphics manager and GPU assignment at power-on ----------
//
// ESXi chooses the GPU of a vGPU VM when the VM powers on, by the host's
// HostGraphicsConfig.sharedPassthruAssignmentPolicy (performance, the default: the GPU with
// the fewest VMs; consolidation: fill a GPU first), and the vGPU manager places a MIG-backed
// vGPU's GPU instance on that GPU then (here: at the lowest free start the profile allows,
// so a 1g powered on before a 4g can block it). The powered-on VMs of each GPU are listed in
// host.config.graphicsInfo[i].vm (and the host graphics manager's graphicsInfo).

const (
	migMemorySlices  = 8
	migComputeSlices = 7
	gpuMemoryGB      = 80
	migSliceGB       = 10
)

var (
	migVgpuType        = regexp.MustCompile(`^[a-z]+_[a-z0-9]+-(\d)-(\d+)c(me)?$`)
	timeslicedVgpuType = regexp.MustCompile(`^[a-z]+_[a-z0-9]+-(\d+)c$`)
	// vgpuPowerOnDelay is how long a vGPU VM's power-on takes once its GPU is chosen (the
	// guest's vGPU coming up), so power-ons that overlap show in the task history.
	vgpuPowerOnDelay time.Duration
	// drsInitialPlacement makes DRS place VMs at power-on, as vCenter does in a cluster
	// with DRS on (fully or partially automated).
	drsInitialPlacement bool
)

// graphicsManager is a host's HostGraphicsManager: it keeps the graphics config (default
// graphics type, assignment policy, per-device types) and the per-GPU VM lists. As on ESXi,
// a config change takes effect when Xorg restarts or the host boots: activePolicy is the
// assignment policy in effect, and graphicsInfo[].graphicsType the active type per GPU.
type graphicsManager struct {
	mo.HostGraphicsManager
	host         *simulator.HostSystem
	activePolicy string
}

func (m *graphicsManager) UpdateGraphicsConfig(req *types.UpdateGraphicsConfig) soap.HasFault {
	policy := req.Config.SharedPassthruAssignmentPolicy
	if policy != "performance" && policy != "consolidation" {
		return &methods.UpdateGraphicsConfigBody{Fault_: simulator.Fault(
			fmt.Sprintf("invalid sharedPassthruAssignmentPolicy %q", policy),
			&types.InvalidArgument{InvalidProperty: "config.sharedPassthruAssignmentPolicy"})}
	}
	config := req.Config
	m.GraphicsConfig = &config
	simulator.Map.WithLock(m.host, func() { m.host.Config.GraphicsConfig = &config })
	return &methods.UpdateGraphicsConfigBody{Res: &types.UpdateGraphicsConfigResponse{}}
}

func (m *graphicsManager) RefreshGraphicsManager(req *types.RefreshGraphicsManager) soap.HasFault {
	return &methods.RefreshGraphicsManagerBody{Res: &types.RefreshGraphicsManagerResponse{}}
}

// addGraphicsManager gives the host its HostGraphicsManager, sharing the host's graphics
// config and info.
func addGraphicsManager(h *simulator.HostSystem) {
	manager := &graphicsManager{host: h, activePolicy: "performance"}
	if h.Config.GraphicsConfig != nil && h.Config.GraphicsConfig.SharedPassthruAssignmentPolicy != "" {
		manager.activePolicy = h.Config.GraphicsConfig.SharedPassthruAssignmentPolicy
	}
	manager.Self = types.ManagedObjectReference{
		Type: "HostGraphicsManager", Value: "graphicsmanager-" + h.Self.Value}
	manager.GraphicsConfig = h.Config.GraphicsConfig
	manager.GraphicsInfo = h.Config.GraphicsInfo
	manager.SharedPassthruGpuTypes = h.Config.SharedPassthruGpuTypes
	ref := simulator.Map.Put(manager).Reference()
	h.ConfigManager.GraphicsManager = &ref
	placer.managers[h.Self] = manager
}

// gpuInstance is one vGPU placed on a GPU: a MIG GPU instance (start and size in memory
// slices) or a time-sliced share (its framebuffer).
type gpuInstance struct {
	vm            types.ManagedObjectReference
	vgpu          string
	mig           bool
	start, memory int
	compute       int
	framebufferGB int
}

type gpuState struct {
	pciID     string
	vms       []types.ManagedObjectReference // powered on, in power-on order
	instances []gpuInstance
}

// vgpuPlacer assigns vGPU VMs to GPUs at power-on and releases them at power-off and
// removal; it watches the registry for the power tasks.
type vgpuPlacer struct {
	mu       sync.Mutex
	gpus     map[types.ManagedObjectReference][]*gpuState
	managers map[types.ManagedObjectReference]*graphicsManager
}

var placer = &vgpuPlacer{
	gpus:     map[types.ManagedObjectReference][]*gpuState{},
	managers: map[types.ManagedObjectReference]*graphicsManager{},
}

func (p *vgpuPlacer) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VgpuPlacer", Value: "vgpu-placer"}
}

// PutObject wraps each new power-on, power-off and destroy task of a VM, and each
// maintenance-mode task of a host (the system VMs on it stopped and started again).
func (p *vgpuPlacer) PutObject(item mo.Reference) {
	task, ok := item.(*simulator.Task)
	if ok && task.Info.Entity != nil && task.Info.Entity.Type == "HostSystem" {
		wrapMaintenance(task)
		return
	}
	if !ok || task.Info.Entity == nil || task.Info.Entity.Type != "VirtualMachine" {
		return
	}
	run := task.Execute
	switch task.Info.DescriptionId {
	case "VirtualMachine.powerOn":
		task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
			return p.powerOn(t, run)
		}
	case "VirtualMachine.powerOff", "VirtualMachine.destroy":
		task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
			result, fault := run(t)
			if fault == nil {
				p.release(*t.Info.Entity)
			}
			return result, fault
		}
	}
}

// UpdateObject releases the GPUs of a VM its guest shut down (ShutdownGuest is no task,
// so PutObject never sees it; a power-off task's release here and after it is harmless).
func (p *vgpuPlacer) UpdateObject(obj mo.Reference, changes []types.PropertyChange) {
	vm, ok := obj.(*mo.VirtualMachine)
	if !ok || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return
	}
	for _, change := range changes {
		if change.Name == "runtime.powerState" {
			p.release(vm.Self)
			return
		}
	}
}

func (p *vgpuPlacer) RemoveObject(ref types.ManagedObjectReference) {
	if ref.Type == "VirtualMachine" {
		p.release(ref)
	}
}

func (p *vgpuPlacer) powerOn(t *simulator.Task, run func(*simulator.Task) (types.AnyType, types.BaseMethodFault)) (types.AnyType, types.BaseMethodFault) {
	vm, ok := simulator.Map.Get(*t.Info.Entity).(*simulator.VirtualMachine)
	if !ok || vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn || vm.Runtime.Host == nil {
		return run(t)
	}
	drsPlace(vm)
	vgpus := vmVgpuTypes(vm)
	if len(vgpus) == 0 {
		result, fault := run(t)
		if fault == nil {
			recordVmHost(vm)
		}
		return result, fault
	}
	host, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok {
		return run(t)
	}
	if fault := p.assign(vm, host, vgpus); fault != nil {
		return nil, fault
	}
	time.Sleep(vgpuPowerOnDelay)
	result, fault := run(t)
	if fault != nil {
		p.release(vm.Self)
	} else {
		recordVmHost(vm)
	}
	return result, fault
}

// recordVmHost writes the host a VM powered on at, for its simulated guest.
func recordVmHost(vm *simulator.VirtualMachine) {
	if labStateDir == "" || vm.Runtime.Host == nil {
		return
	}
	host, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok {
		return
	}
	writeStateFile("vm-host", vm.Name, host.Name)
}

func writeStateFile(kind, name, value string) {
	dir := filepath.Join(labStateDir, kind)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Printf("writing %s/%s: %v", kind, name, err)
		return
	}
	path := filepath.Join(dir, name)
	if value == "" {
		_ = os.Remove(path)
		return
	}
	if err := ioutil.WriteFile(path+".tmp", []byte(value+"\n"), 0o644); err == nil {
		_ = os.Rename(path+".tmp", path)
	}
}

// vmVgpuTypes lists the VM's vGPU devices (VirtualPCIPassthrough with a vmiop backing).
func vmVgpuTypes(vm *simulator.VirtualMachine) []string {
	var out []string
	for _, device := range vm.Config.Hardware.Device {
		pci, ok := device.(*types.VirtualPCIPassthrough)
		if !ok {
			continue
		}
		if backing, ok := pci.Backing.(*types.VirtualPCIPassthroughVmiopBackingInfo); ok {
			out = append(out, backing.Vgpu)
		}
	}
	return out
}

func (p *vgpuPlacer) hostGpus(host *simulator.HostSystem) []*gpuState {
	gpus, ok := p.gpus[host.Self]
	if !ok {
		for _, info := range host.Config.GraphicsInfo {
			gpus = append(gpus, &gpuState{pciID: info.PciId})
		}
		p.gpus[host.Self] = gpus
	}
	return gpus
}

// hostPolicy is the assignment policy in effect on the host: the configured one only once
// Xorg restarted or the host booted after it was set.
func hostPolicy(host *simulator.HostSystem) string {
	policy := "performance"
	simulator.Map.WithLock(host, func() {
		if manager := placer.managers[host.Self]; manager != nil && manager.activePolicy != "" {
			policy = manager.activePolicy
		}
	})
	return policy
}

// assign places each of the VM's vGPUs on a GPU by the host's policy, or says why the VM
// cannot power on (as ESXi refuses when no GPU has room).
func (p *vgpuPlacer) assign(vm *simulator.VirtualMachine, host *simulator.HostSystem, vgpus []string) types.BaseMethodFault {
	p.mu.Lock()
	defer p.mu.Unlock()
	policy := hostPolicy(host)
	gpus := p.hostGpus(host)
	var placed []*gpuState
	for _, vgpu := range vgpus {
		gpu, instance := choose(gpus, vgpu, policy)
		if gpu == nil {
			for _, g := range placed {
				g.drop(vm.Self)
			}
			message := fmt.Sprintf("Could not initialize plugin 'libnvidia-vgx.so' for vGPU "+
				"'%s' of VM %s: no GPU of host %s has room for it (assignment policy %s)",
				vgpu, vm.Name, host.Name, policy)
			return &types.InsufficientResourcesFault{VimFault: types.VimFault{MethodFault: types.MethodFault{
				FaultMessage: []types.LocalizableMessage{{Key: "vgpu.placement", Message: message}}}}}
		}
		instance.vm = vm.Self
		gpu.instances = append(gpu.instances, instance)
		if !gpu.has(vm.Self) {
			gpu.vms = append(gpu.vms, vm.Self)
		}
		placed = append(placed, gpu)
	}
	p.publish(host)
	return nil
}

// choose picks the GPU for one vGPU: performance takes the GPU with the fewest VMs that has
// room, consolidation the first GPU with room.
func choose(gpus []*gpuState, vgpu, policy string) (*gpuState, gpuInstance) {
	var best *gpuState
	var bestInstance gpuInstance
	for _, gpu := range gpus {
		instance, ok := gpu.fit(vgpu)
		if !ok {
			continue
		}
		if policy == "consolidation" {
			return gpu, instance
		}
		if best == nil || len(gpu.vms) < len(best.vms) {
			best, bestInstance = gpu, instance
		}
	}
	return best, bestInstance
}

// migStarts are the memory slices a MIG profile may start at on an A100/H100 (8 memory,
// 7 compute slices).
func migStarts(compute, memory int) []int {
	if compute == 4 {
		return []int{0}
	}
	var starts []int
	for start := 0; start+memory <= migMemorySlices; start += memory {
		if memory == 1 && start == migComputeSlices {
			break
		}
		starts = append(starts, start)
	}
	return starts
}

// fit says where the vGPU would go on this GPU: a MIG profile at the lowest free start it
// allows (no time-sliced vGPU on the GPU), a time-sliced type beside only its own kind
// within the framebuffer.
func (g *gpuState) fit(vgpu string) (gpuInstance, bool) {
	name := strings.ToLower(vgpu)
	if m := migVgpuType.FindStringSubmatch(name); m != nil {
		compute, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		memory := size / migSliceGB
		if memory < 1 {
			memory = 1
		}
		used := 0
		for _, inst := range g.instances {
			if !inst.mig {
				return gpuInstance{}, false
			}
			used += inst.compute
		}
		if used+compute > migComputeSlices {
			return gpuInstance{}, false
		}
		for _, start := range migStarts(compute, memory) {
			if g.free(start, memory) {
				return gpuInstance{vgpu: vgpu, mig: true, start: start, memory: memory, compute: compute}, true
			}
		}
		return gpuInstance{}, false
	}
	if m := timeslicedVgpuType.FindStringSubmatch(name); m != nil {
		framebuffer, _ := strconv.Atoi(m[1])
		used := 0
		for _, inst := range g.instances {
			if inst.mig || inst.vgpu != vgpu {
				return gpuInstance{}, false
			}
			used += inst.framebufferGB
		}
		if framebuffer == 0 || used+framebuffer > gpuMemoryGB {
			return gpuInstance{}, false
		}
		return gpuInstance{vgpu: vgpu, framebufferGB: framebuffer}, true
	}
	return gpuInstance{}, false
}

func (g *gpuState) free(start, memory int) bool {
	for _, inst := range g.instances {
		if inst.mig && start < inst.start+inst.memory && inst.start < start+memory {
			return false
		}
	}
	return true
}

func (g *gpuState) has(vm types.ManagedObjectReference) bool {
	for _, ref := range g.vms {
		if ref == vm {
			return true
		}
	}
	return false
}

func (g *gpuState) drop(vm types.ManagedObjectReference) bool {
	changed := false
	instances := g.instances[:0]
	for _, inst := range g.instances {
		if inst.vm == vm {
			changed = true
			continue
		}
		instances = append(instances, inst)
	}
	g.instances = instances
	vms := g.vms[:0]
	for _, ref := range g.vms {
		if ref != vm {
			vms = append(vms, ref)
		}
	}
	g.vms = vms
	return changed
}

func (p *vgpuPlacer) release(vm types.ManagedObjectReference) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for hostRef, gpus := range p.gpus {
		changed := false
		for _, gpu := range gpus {
			if gpu.drop(vm) {
				changed = true
			}
		}
		if host, ok := simulator.Map.Get(hostRef).(*simulator.HostSystem); ok && changed {
			p.publish(host)
		}
	}
}

// publish writes the per-GPU VM lists into the host's graphicsInfo (new slices: readers may
// hold the old ones).
func (p *vgpuPlacer) publish(host *simulator.HostSystem) {
	gpus := p.gpus[host.Self]
	simulator.Map.WithLock(host, func() {
		info := make([]types.HostGraphicsInfo, len(host.Config.GraphicsInfo))
		copy(info, host.Config.GraphicsInfo)
		for i := range info {
			info[i].Vm = nil
			for _, gpu := range gpus {
				if gpu.pciID == info[i].PciId {
					info[i].Vm = append([]types.ManagedObjectReference{}, gpu.vms...)
				}
			}
		}
		host.Config.GraphicsInfo = info
		if manager := p.managers[host.Self]; manager != nil {
			manager.GraphicsInfo = info
		}
	})
}

// passthroughGpus puts every GPU of the host in passthrough, as after `esxcli hardware pci
// pcipassthru set -d <pci> -e true -a` and a reboot: enabled and active, graphics type
// direct.
func passthroughGpus(h *simulator.HostSystem) {
	gpus := map[string]bool{}
	for _, info := range h.Config.GraphicsInfo {
		gpus[info.PciId] = true
	}
	for _, base := range h.Config.PciPassthruInfo {
		info := base.GetHostPciPassthruInfo()
		if gpus[info.Id] {
			info.PassthruEnabled = true
			info.PassthruActive = true
		}
	}
	for i := range h.Config.GraphicsInfo {
		h.Config.GraphicsInfo[i].GraphicsType = "direct"
	}
	if h.Config.GraphicsConfig != nil {
		for i := range h.Config.GraphicsConfig.DeviceType {
			h.Config.GraphicsConfig.DeviceType[i].GraphicsType = "direct"
		}
	}
}

// drsPlace does DRS initial placement at power-on: unless the VM's DRS behaviour (its
// override, else the cluster default) is manual, the VM goes to the usable host of its
// cluster with the fewest powered-on VMs (it stays where it is on a tie).
func drsPlace(vm *simulator.VirtualMachine) {
	if !drsInitialPlacement {
		return
	}
	host, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok || host.Parent == nil {
		return
	}
	cluster, ok := simulator.Map.Get(*host.Parent).(*simulator.ClusterComputeResource)
	if !ok {
		return
	}
	behavior := types.DrsBehaviorFullyAutomated
	var hosts []types.ManagedObjectReference
	simulator.Map.WithLock(cluster, func() {
		config, _ := cluster.ConfigurationEx.(*types.ClusterConfigInfoEx)
		if config == nil || config.DrsConfig.Enabled == nil || !*config.DrsConfig.Enabled {
			behavior = types.DrsBehaviorManual
			return
		}
		if config.DrsConfig.DefaultVmBehavior != "" {
			behavior = config.DrsConfig.DefaultVmBehavior
		}
		for _, override := range config.DrsVmConfig {
			if override.Key == vm.Self && override.Behavior != "" {
				behavior = override.Behavior
			}
		}
		hosts = append(hosts, cluster.Host...)
	})
	if behavior == types.DrsBehaviorManual {
		return
	}
	running := map[types.ManagedObjectReference]int{}
	for _, entity := range simulator.Map.All("VirtualMachine") {
		other, ok := entity.(*simulator.VirtualMachine)
		if ok && other.Runtime.Host != nil && other.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			running[*other.Runtime.Host]++
		}
	}
	best := host.Self
	for _, ref := range hosts {
		candidate, ok := simulator.Map.Get(ref).(*simulator.HostSystem)
		if !ok || candidate.Runtime.ConnectionState != types.HostSystemConnectionStateConnected || candidate.Runtime.InMaintenanceMode {
			continue
		}
		if running[ref] < running[best] {
			best = ref
		}
	}
	if best != host.Self {
		target := best
		simulator.Map.Update(vm, []types.PropertyChange{
			{Name: "runtime.host", Val: &target},
			{Name: "summary.runtime.host", Val: &target},
		})
	}
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

// ---- a host upgrade in place: what `vgpu sim upgrade --host` does ----------------------
//
// An engineer installs an ESXi build and the NVIDIA host driver VIB on a host in
// maintenance mode (esxcli or vLCM, outside the vSphere API), then reboots it. The host's
// VMs stay registered, powered off; other hosts keep their build. Until the reboot the
// new packages are installed but not running: summary.rebootRequired is set and
// config.product is still the running build. The reboot sets runtime.bootTime.

const upgradePath = "/vgpu-lab/upgrade"

// upgradeHandler answers POST upgradePath (form: host, build, vib, version optional,
// reboot true|false), with the lab's login as basic auth.
func upgradeHandler(c labConfig) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		if !ok || user != c.username || password != c.password {
			http.Error(w, "the lab's user and password are needed", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		name := r.FormValue("host")
		var host *simulator.HostSystem
		for _, obj := range simulator.Map.All("HostSystem") {
			if h := obj.(*simulator.HostSystem); h.Name == name {
				host = h
			}
		}
		if host == nil {
			http.Error(w, fmt.Sprintf("no host %q in the lab", name), http.StatusNotFound)
			return
		}
		var problem string
		simulator.Map.WithLock(host, func() {
			problem = upgradeHost(host, r.FormValue("version"), r.FormValue("build"),
				r.FormValue("vib"), r.FormValue("reboot") != "false")
			if problem == "" {
				problem = upgradeGpuStack(host, r.FormValue("drop_vib") == "true",
					r.FormValue("unload") == "true", r.FormValue("reboot") != "false")
			}
			if problem == "" && r.FormValue("reboot") != "false" {
				writeStateFile("host-slowdown", host.Name, r.FormValue("slowdown"))
			}
			if problem == "" {
				upgradesOf[host.Name]++
				writeStateFile("host-upgrades", host.Name, strconv.Itoa(upgradesOf[host.Name]))
			}
		})
		if problem != "" {
			http.Error(w, problem, http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "%s: build %s, reboot required %v, booted %s\n", host.Name,
			host.Config.Product.Build, host.Summary.RebootRequired,
			host.Runtime.BootTime.UTC().Format(time.RFC3339))
	}
}

// upgradeHost installs the packages (an empty field keeps what is installed) and, with
// reboot, boots the host into them. It refuses a host out of maintenance mode, as ESXi
// refuses a VIB that needs it.
func upgradeHost(h *simulator.HostSystem, version, build, vib string, reboot bool) string {
	if !h.Runtime.InMaintenanceMode {
		return fmt.Sprintf("host %s is not in maintenance mode: the VIB needs it", h.Name)
	}
	manager := imageManagers[h.Self]
	if manager == nil {
		return fmt.Sprintf("host %s has no image config manager", h.Name)
	}
	installedVersion, installedBuild := installedEsxi(manager.packages)
	if version == "" {
		version = installedVersion
	}
	if build == "" {
		build = installedBuild
	}
	packages := packagesOf(version, build, vib)
	// A host without the NVIDIA driver stays without it, unless it is a vGPU host whose
	// driver an earlier image dropped (this image brings the component back).
	if len(manager.packages) < 2 && (len(vgpuTypesOf[h.Self]) == 0 || vib == "") {
		packages = packages[:1]
	} else if vib == "" {
		packages[1].Version = manager.packages[1].Version
	}
	manager.packages = packages
	if !reboot {
		h.Summary.RebootRequired = true
		return ""
	}
	product := h.Config.Product
	product.Version, product.Build = version, build
	product.FullName = fmt.Sprintf("VMware ESXi %s build-%s", version, build)
	h.Config.Product = product
	h.Summary.Config.Product = &h.Config.Product
	now := time.Now()
	h.Runtime.BootTime = &now
	h.Summary.RebootRequired = false
	activateGraphics(h) // a boot starts Xorg with the configured graphics settings
	return ""
}

// upgradeGpuStack is what the new image did to the NVIDIA stack: dropVib, an image without
// the NVIDIA component (the VIB is gone, no vGPU type offered); unload, a VIB whose
// vGPU manager module did not load (the VIB is listed, no vGPU type offered); else, after
// a boot, the vGPU types the host offered at the start are offered again.
func upgradeGpuStack(h *simulator.HostSystem, dropVib, unload, reboot bool) string {
	manager := imageManagers[h.Self]
	if dropVib && len(manager.packages) > 1 {
		manager.packages = manager.packages[:1]
	}
	if !reboot {
		return ""
	}
	if dropVib || unload || len(manager.packages) < 2 {
		h.Config.SharedPassthruGpuTypes = nil
	} else {
		h.Config.SharedPassthruGpuTypes = vgpuTypesOf[h.Self]
	}
	return ""
}

// installedEsxi reads the version and build back from the esx-base package
// ("8.0.2-0.0.22380479").
func installedEsxi(packages []types.SoftwarePackage) (string, string) {
	parts := strings.SplitN(packages[0].Version, "-0.0.", 2)
	if len(parts) != 2 {
		return packages[0].Version, ""
	}
	return parts[0], parts[1]
}

// ---- the host's services: Xorg and the graphics settings it puts in effect ---------------
//
// ESXi's HostServiceSystem lists the host's services (xorg among them: the X.Org server the
// vGPU manager's graphics settings are read by) and starts, stops and restarts them. The
// simulator has no service system, so each host gets one here. A restart (or start) of
// xorg puts the host's configured graphics settings in effect: the assignment policy and
// each GPU's configured graphics type.

const xorgPath = "/vgpu-lab/xorg"

type serviceSystem struct {
	mo.HostServiceSystem
	host         *simulator.HostSystem
	xorgRestarts int
	// xorgFails: the host's GPUs are compute GPUs (A100, H100) with no display, where
	// Xorg does not start
	xorgFails bool
}

var serviceSystems = map[types.ManagedObjectReference]*serviceSystem{}

func (s *serviceSystem) service(key string) *types.HostService {
	for i := range s.ServiceInfo.Service {
		if s.ServiceInfo.Service[i].Key == key {
			return &s.ServiceInfo.Service[i]
		}
	}
	return nil
}

func (s *serviceSystem) setRunning(key string, running bool) *soap.Fault {
	service := s.service(key)
	if service == nil {
		return simulator.Fault(fmt.Sprintf("no service %q on host %s", key, s.host.Name),
			&types.NotFound{})
	}
	if key == "xorg" && running && s.xorgFails {
		return simulator.Fault(fmt.Sprintf("xorg failed to start on host %s: no display "+
			"device (compute GPUs in vGPU mode need no Xorg)", s.host.Name),
			&types.HostConfigFault{})
	}
	services := append([]types.HostService{}, s.ServiceInfo.Service...)
	for i := range services {
		if services[i].Key == key {
			services[i].Running = running
		}
	}
	s.ServiceInfo = types.HostServiceInfo{Service: services}
	if key == "xorg" && running {
		s.xorgRestarts++
		simulator.Map.WithLock(s.host, func() { activateGraphics(s.host) })
	}
	return nil
}

func (s *serviceSystem) RestartService(req *types.RestartService) soap.HasFault {
	if fault := s.setRunning(req.Id, true); fault != nil {
		return &methods.RestartServiceBody{Fault_: fault}
	}
	return &methods.RestartServiceBody{Res: &types.RestartServiceResponse{}}
}

func (s *serviceSystem) StartService(req *types.StartService) soap.HasFault {
	if fault := s.setRunning(req.Id, true); fault != nil {
		return &methods.StartServiceBody{Fault_: fault}
	}
	return &methods.StartServiceBody{Res: &types.StartServiceResponse{}}
}

func (s *serviceSystem) StopService(req *types.StopService) soap.HasFault {
	if fault := s.setRunning(req.Id, false); fault != nil {
		return &methods.StopServiceBody{Fault_: fault}
	}
	return &methods.StopServiceBody{Res: &types.StopServiceResponse{}}
}

func (s *serviceSystem) RefreshServices(req *types.RefreshServices) soap.HasFault {
	return &methods.RefreshServicesBody{Res: &types.RefreshServicesResponse{}}
}

// addServiceSystem gives the host its HostServiceSystem with the services of an ESXi 8
// GPU host, Xorg running.
func addServiceSystem(h *simulator.HostSystem, xorgOff bool) {
	system := &serviceSystem{host: h, xorgFails: xorgOff}
	system.Self = types.ManagedObjectReference{Type: "HostServiceSystem", Value: "servicesystem-" + h.Self.Value}
	system.ServiceInfo = types.HostServiceInfo{Service: []types.HostService{
		{Key: "TSM-SSH", Label: "SSH", Policy: "off"},
		{Key: "ntpd", Label: "NTP Daemon", Policy: "on", Running: true},
		{Key: "vpxa", Label: "VMware vCenter Agent", Required: true, Policy: "on", Running: true},
		{Key: "xorg", Label: "X.Org Server", Policy: "on", Running: !xorgOff},
	}}
	ref := simulator.Map.Put(system).Reference()
	h.ConfigManager.ServiceSystem = &ref
	serviceSystems[h.Self] = system
}

// activateGraphics puts the host's configured graphics settings in effect (call with the
// host locked): the assignment policy, and each GPU's graphics type (its own, else the
// host default).
func activateGraphics(h *simulator.HostSystem) {
	manager := placer.managers[h.Self]
	config := h.Config.GraphicsConfig
	if manager == nil || config == nil {
		return
	}
	if config.SharedPassthruAssignmentPolicy != "" {
		manager.activePolicy = config.SharedPassthruAssignmentPolicy
	}
	configured := map[string]string{}
	for _, device := range config.DeviceType {
		configured[device.DeviceId] = device.GraphicsType
	}
	info := make([]types.HostGraphicsInfo, len(h.Config.GraphicsInfo))
	copy(info, h.Config.GraphicsInfo)
	for i := range info {
		if kind, ok := configured[info[i].PciId]; ok && kind != "" {
			info[i].GraphicsType = kind
		} else if config.HostDefaultGraphicsType != "" {
			info[i].GraphicsType = config.HostDefaultGraphicsType
		}
	}
	h.Config.GraphicsInfo = info
	manager.GraphicsInfo = info
}

// xorgHandler answers GET xorgPath?host=H with what the simulator recorded of the host's
// Xorg (a test's view, no vSphere API): running, how often it (re)started, and the
// assignment policy in effect.
func xorgHandler(c labConfig) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		if !ok || user != c.username || password != c.password {
			http.Error(w, "the lab's user and password are needed", http.StatusUnauthorized)
			return
		}
		name := r.FormValue("host")
		for _, obj := range simulator.Map.All("HostSystem") {
			h := obj.(*simulator.HostSystem)
			if h.Name != name {
				continue
			}
			system := serviceSystems[h.Self]
			if system == nil {
				break
			}
			running, restarts := false, 0
			simulator.Map.WithLock(system, func() {
				if xorg := system.service("xorg"); xorg != nil {
					running = xorg.Running
				}
				restarts = system.xorgRestarts
			})
			fmt.Fprintf(w, "{\"running\": %v, \"restarts\": %d, \"active_policy\": %q}\n",
				running, restarts, hostPolicy(h))
			return
		}
		http.Error(w, fmt.Sprintf("no host %q in the lab", name), http.StatusNotFound)
	}
}

// ---- the cluster's system VMs: vCLS and ESX Agent Manager agents --------------------------
//
// A vSphere 7.0 U1+ cluster runs vSphere Cluster Services VMs (up to 3, folder vCLS) and
// solutions' agent VMs (NSX, vSAN file services, antivirus: one per host), all managed by
// the ESX Agent Manager (config.managedBy com.vmware.vim.eam). Maintenance mode takes care
// of them by itself: agents are powered off with their host entering maintenance mode and
// on again when it leaves; vCLS VMs are moved or (Embedded vCLS, 8.0 U3) stopped and
// restarted elsewhere. Here both kinds are powered off on entry and on again on exit (where
// the real vCLS would restart on another host meanwhile).

const eamExtension = "com.vmware.vim.eam"

// stoppedByMaintenance lists, per host, the system VMs its maintenance mode powered off.
var stoppedByMaintenance = map[types.ManagedObjectReference][]types.ManagedObjectReference{}

func addSystemVms(ctx context.Context, u *url.URL) error {
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
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	vcls, err := folders.VmFolder.CreateFolder(ctx, "vCLS")
	if err != nil {
		return err
	}
	agents, err := folders.VmFolder.CreateFolder(ctx, "ESX Agents")
	if err != nil {
		return err
	}
	pool, err := finder.DefaultResourcePool(ctx)
	if err != nil {
		return err
	}
	hosts, err := finder.HostSystemList(ctx, "*")
	if err != nil {
		return err
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name() < hosts[j].Name() })
	for i, host := range hosts {
		if i < 3 {
			name := fmt.Sprintf("vCLS-4c4c4544-%04d-4710-8047-c7c04f4d%04d", i, i)
			if err := systemVm(ctx, vcls, pool, host, name, "cluster-agent"); err != nil {
				return err
			}
		}
		if err := systemVm(ctx, agents, pool, host, "nsx-agent-"+host.Name(), "agent"); err != nil {
			return err
		}
	}
	return nil
}

func systemVm(ctx context.Context, folder *object.Folder, pool *object.ResourcePool,
	host *object.HostSystem, name, kind string) error {
	spec := types.VirtualMachineConfigSpec{
		Name:      name,
		GuestId:   "other3xLinux64Guest",
		NumCPUs:   1,
		MemoryMB:  128,
		Files:     &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
		ManagedBy: &types.ManagedByInfo{ExtensionKey: eamExtension, Type: kind},
	}
	task, err := folder.CreateVM(ctx, spec, pool, host)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	vm := object.NewVirtualMachine(folder.Client(), info.Result.(types.ManagedObjectReference))
	power, err := vm.PowerOn(ctx)
	if err != nil {
		return err
	}
	return power.Wait(ctx)
}

func wrapMaintenance(task *simulator.Task) {
	host := *task.Info.Entity
	run := task.Execute
	switch task.Info.DescriptionId {
	case "HostSystem.enterMaintenanceMode":
		task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
			result, fault := run(t)
			if fault == nil {
				stopSystemVms(host)
			}
			return result, fault
		}
	case "HostSystem.exitMaintenanceMode":
		task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
			result, fault := run(t)
			if fault == nil {
				startSystemVms(host)
			}
			return result, fault
		}
	}
}

func setPower(vm *simulator.VirtualMachine, state types.VirtualMachinePowerState) {
	simulator.Map.WithLock(vm, func() {
		simulator.Map.Update(vm, []types.PropertyChange{
			{Name: "runtime.powerState", Val: state},
			{Name: "summary.runtime.powerState", Val: state},
		})
	})
}

func stopSystemVms(host types.ManagedObjectReference) {
	for _, obj := range simulator.Map.All("VirtualMachine") {
		vm := obj.(*simulator.VirtualMachine)
		if vm.Runtime.Host == nil || *vm.Runtime.Host != host || vm.Config == nil ||
			vm.Config.ManagedBy == nil || vm.Config.ManagedBy.ExtensionKey != eamExtension ||
			vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
			continue
		}
		setPower(vm, types.VirtualMachinePowerStatePoweredOff)
		stoppedByMaintenance[host] = append(stoppedByMaintenance[host], vm.Self)
	}
}

func startSystemVms(host types.ManagedObjectReference) {
	for _, ref := range stoppedByMaintenance[host] {
		if vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine); ok {
			setPower(vm, types.VirtualMachinePowerStatePoweredOn)
		}
	}
	delete(stoppedByMaintenance, host)
}

// ---- privileges: what a session may do, from the roles and permissions set on entities ----
//
// The simulator answers every privilege check with "granted". Here HasPrivilegeOnEntities
// answers as vCenter does from the permissions an administrator set
// (AuthorizationManager.SetEntityPermissions with a role from AddAuthorizationRole): the
// permission of the session's user on the entity itself, else the nearest one above it
// that propagates, decides; its role's privileges (and System.*) are granted. A user with
// no permission anywhere is the lab's administrator, as the simulator treats every login.

type authorizationManager struct {
	*simulator.AuthorizationManager
}

var authorizationRef = types.ManagedObjectReference{Type: "AuthorizationManager", Value: "AuthorizationManager"}

func (m *authorizationManager) permissionsOn(ref types.ManagedObjectReference) []types.Permission {
	body := m.AuthorizationManager.RetrieveEntityPermissions(&types.RetrieveEntityPermissions{Entity: ref})
	return body.(*methods.RetrieveEntityPermissionsBody).Res.Returnval
}

func (m *authorizationManager) userHasAnyPermission(user string) bool {
	body := m.AuthorizationManager.RetrieveAllPermissions(&types.RetrieveAllPermissions{})
	for _, p := range body.(*methods.RetrieveAllPermissionsBody).Res.Returnval {
		if !p.Group && p.Principal == user {
			return true
		}
	}
	return false
}

// granted returns the privileges ``user`` holds on ``ref``; nil and true for all of them.
func (m *authorizationManager) granted(user string, ref types.ManagedObjectReference) (map[string]bool, bool) {
	if !m.userHasAnyPermission(user) {
		return nil, true
	}
	self := true
	for current := &ref; current != nil; {
		for _, p := range m.permissionsOn(*current) {
			if p.Group || p.Principal != user || (!self && !p.Propagate) {
				continue
			}
			privileges := map[string]bool{"System.Anonymous": true, "System.Read": true, "System.View": true}
			for _, role := range m.RoleList {
				if role.RoleId == p.RoleId {
					for _, id := range role.Privilege {
						privileges[id] = true
					}
				}
			}
			return privileges, false
		}
		entity, ok := simulator.Map.Get(*current).(mo.Entity)
		if !ok {
			break
		}
		current = entity.Entity().Parent
		self = false
	}
	return map[string]bool{}, false
}

func (m *authorizationManager) HasPrivilegeOnEntities(ctx *simulator.Context, req *types.HasPrivilegeOnEntities) soap.HasFault {
	user := ""
	if ctx.Session != nil {
		user = ctx.Session.UserName
	}
	var answer []types.EntityPrivilege
	for _, e := range req.Entity {
		privileges, all := m.granted(user, e)
		entry := types.EntityPrivilege{Entity: e}
		for _, id := range req.PrivId {
			entry.PrivAvailability = append(entry.PrivAvailability,
				types.PrivilegeAvailability{PrivId: id, IsGranted: all || privileges[id]})
		}
		answer = append(answer, entry)
	}
	return &methods.HasPrivilegeOnEntitiesBody{Res: &types.HasPrivilegeOnEntitiesResponse{Returnval: answer}}
}

// AddAuthorizationRole answers the new role's id, as vCenter does (the simulator answers none).
func (m *authorizationManager) AddAuthorizationRole(req *types.AddAuthorizationRole) soap.HasFault {
	body := m.AuthorizationManager.AddAuthorizationRole(req).(*methods.AddAuthorizationRoleBody)
	if body.Res != nil {
		for _, role := range m.RoleList {
			if role.Name == req.Name {
				body.Res.Returnval = role.RoleId
			}
		}
	}
	return body
}

func enforcePermissions() {
	original := simulator.Map.Get(authorizationRef).(*simulator.AuthorizationManager)
	simulator.Map.Put(&authorizationManager{original})
}
