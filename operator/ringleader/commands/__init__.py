"""The front ends of the commands that read what runs recorded, or model it: their options, messages and exit statuses.

whatif.py (with addcalibration.py, the add's timing) and predict.py (with plan.py, a cluster not run on) read
SOURCE through sources.py; report.py, publish.py and ui.py the run directories and MLflow; profile.py has one
worker run by the local launcher (launch/). The models they print are models/'s and planning/'s, the figures
report/'s; cli.py delegates here, importing a module only when its command is called.
"""
