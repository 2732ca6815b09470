tutti_add_test(schedule_sim_test LABEL unit SOURCES schedule_sim_test.cc)
tutti_add_test(api_test LABEL unit SOURCES api_test.cc)
tutti_add_test(launcher_env_test LABEL unit SOURCES launcher_env_test.cc)
