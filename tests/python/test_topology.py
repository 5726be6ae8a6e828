"""Device.peer() and Device.numa_node: the topology queries from Python."""

import os
import subprocess
import sys

import pytest

import axrt

LINKS = {"self", "host-memory", "pcie", "nvlink", "none"}
KEYS = {"link", "link_count", "direct_access", "native_atomics", "performance_rank"}


def test_every_device_reaches_itself_and_has_a_numa_node():
    for d in axrt.devices():
        info = d.peer(d)
        assert set(info) == KEYS
        assert info["link"] == "self"
        assert info["direct_access"] and info["native_atomics"]
        assert isinstance(d.numa_node, int) and d.numa_node >= -1


def test_every_pair_has_a_known_link():
    devices = axrt.devices()
    for a in devices:
        for b in devices:
            info = a.peer(b)
            assert info["link"] in LINKS
            assert info["link_count"] >= 0
            if info["link"] == "nvlink":
                assert info["link_count"] > 0


def test_cuda_devices_of_the_mock_reach_each_other_over_pcie():
    names = [d.id for d in axrt.devices()]
    if "cuda:1" not in names:
        pytest.skip("no cuda:1: the mock CUDA driver is not loaded")
    gpu0, gpu1, cpu = axrt.device("cuda:0"), axrt.device("cuda:1"), axrt.device("cpu:0")
    # The mock is loaded without NVML: P2P is PCIe.
    assert gpu0.peer(gpu1) == {"link": "pcie", "link_count": 0, "direct_access": True,
                               "native_atomics": True, "performance_rank": 0}
    assert cpu.peer(gpu0)["link"] == "none"
    assert not gpu1.peer(cpu)["direct_access"]


def test_peer_takes_a_device():
    with pytest.raises(TypeError):
        axrt.device("cpu:0").peer("cpu:0")


def test_cpu_devices_reach_each_other_through_host_memory():
    code = ("import axrt; a, b = axrt.device('cpu:0'), axrt.device('cpu:1'); "
            "print(a.peer(b)['link'], b.peer(a)['direct_access'], a.numa_node == b.numa_node)")
    env = dict(os.environ, AXRT_CPU_DEVICES="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["host-memory", "True", "True"]
