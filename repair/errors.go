package repair
