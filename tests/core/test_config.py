import time

import pytest

from flexflow.core import FFConfig, FlagError


def test_defaults_match_flexflow():
    cfg = FFConfig(argv=[])
    assert (cfg.batch_size, cfg.epochs, cfg.workers_per_node, cfg.num_nodes) == (64, 1, 0, 1)
    assert cfg.search_budget == 0 and cfg.search_alpha == 1.0
    assert cfg.enable_control_replication and cfg.python_data_loader_type == 2
    assert cfg.simulator_segment_size == 16777216 and cfg.simulator_max_num_segments == 1


def test_flexflow_command_line_is_parsed():
    argv = ["script.py", "-ll:py", "1", "-ll:gpu", "4", "-ll:fsize", "14g", "-ll:zsize", "12192",
            "-b", "256", "--epochs", "5", "--budget", "1000", "--alpha", "0.05",
            "--export", "s.txt", "--enable-parameter-parallel", "--enable-attribute-parallel",
            "--taskgraph", "tg.dot", "--lr", "0.1", "--my-script-flag", "x", "-d", "data/"]
    cfg = FFConfig(argv=argv)
    assert cfg.workers_per_node == 4 and cfg.device_memory_mb == 14 * 1024
    assert cfg.zero_copy_memory_mb == 12192
    assert (cfg.batch_size, cfg.epochs, cfg.search_budget, cfg.search_alpha) == (256, 5, 1000, 0.05)
    assert cfg.export_strategy_file == "s.txt" and cfg.export_strategy_task_graph_file == "tg.dot"
    # FlexFlow's --enable-attribute-parallel set the parameter flag (a bug); here each sets its own
    assert cfg.enable_parameter_parallel and cfg.enable_attribute_parallel
    assert cfg.learning_rate == 0.1 and cfg.dataset_path == "data/"
    assert cfg.num_devices == 4


def test_long_and_short_forms_agree():
    assert FFConfig(argv=["--batch-size", "32"]).batch_size == FFConfig(argv=["-b", "32"]).batch_size


@pytest.mark.parametrize("argv, flag", [(["-b", "abc"], "-b"), (["-e", "0"], "-e"),
                                        (["--alpha", "hot"], "--alpha"), (["-ll:gpu", "-1"], "-ll:gpu"),
                                        (["--budget"], "--budget")])
def test_malformed_values_name_the_flag(argv, flag):
    with pytest.raises(FlagError, match=flag):
        FFConfig(argv=argv)


def test_programmatic_construction_and_unknown_settings():
    assert FFConfig(argv=[], batch_size=8, epochs=3).batch_size == 8
    with pytest.raises(TypeError, match="batchsize"):
        FFConfig(argv=[], batchsize=8)


def test_scheduler_address_from_environment(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    assert FFConfig(argv=[]).scheduler_address == "tcp://127.0.0.1:8786"
    assert FFConfig(argv=["--scheduler", "tcp://h:1"]).scheduler_address == "tcp://h:1"


def test_current_time_is_in_microseconds():
    cfg = FFConfig(argv=[])
    start = cfg.get_current_time()
    time.sleep(0.01)
    elapsed = cfg.get_current_time() - start
    assert 9_000 < elapsed < 1_000_000
    cfg.begin_trace(111)
    cfg.end_trace(111)
