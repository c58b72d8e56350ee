"""
Utils package for DermCheck
"""
